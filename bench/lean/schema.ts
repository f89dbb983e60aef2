import type { RunTables } from '../lib/run-tables.ts';

/**
 * The lean reference's tables, in a schema of their own in the benchmark database: a run, its
 * stages, their task results; keys, foreign keys and the indexes its statements need, nothing else.
 */
export const LEAN_DDL = `
create schema if not exists lean;
create table if not exists lean.runs (
  id text primary key,
  workspace_id text not null,
  message text not null,
  status text not null default 'pending',
  created_at timestamptz not null default clock_timestamp(),
  applied_at timestamptz
);
create table if not exists lean.stages (
  id text primary key,
  run_id text not null references lean.runs (id),
  stage text not null,
  ordinal int not null,
  status text not null
);
create index if not exists stages_run_ordinal on lean.stages (run_id, ordinal);
create table if not exists lean.results (
  id text primary key,
  stage_id text not null references lean.stages (id),
  run_id text not null,
  task_url text not null,
  status text not null,
  message text,
  updated_at timestamptz
);
create index if not exists results_stage on lean.results (stage_id);
`;

export const LEAN_TABLES: RunTables = {
  progress: `select count(*) filter (where status = 'applied') as ok, 0 as failed, count(*) as total from lean.runs`,
  seconds: `select extract(epoch from max(applied_at) - min(created_at))::float8 as seconds from lean.runs where status = 'applied'`,
  unfinished: `select count(*) as open from lean.runs where status <> 'applied'`,
  applied: `select id, extract(epoch from applied_at) * 1000 as applied from lean.runs`,
  truncate: 'truncate lean.runs, lean.stages, lean.results',
};

/** Stages every lean run goes through, in order (S = 2, as the project's benchmark runs). */
export const LEAN_STAGES = ['pre_plan', 'post_plan'] as const;
