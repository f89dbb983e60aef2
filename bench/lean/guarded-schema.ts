import type { RunTables } from '../lib/run-tables.ts';

/**
 * The guarded lean reference's tables (bench/lean/guarded-*.ts), in a schema of their own: the lean
 * reference's run, stages and results, with what the service's guarantees need written beside them and
 * nothing else (docs/benchmarks.md, "What the guarantees cost on their own"):
 * - results keep their lease, acknowledgement and deadlines, and the task as planned (name, URL, level);
 * - stages count their open results, so the verdict that closes one knows it in its own transaction;
 * - `attempts`: a row per POST, written before it and filled in after;
 * - `outbox`: a row per job the pipeline needs, in the transaction that makes it needed;
 * - `run_events`: the run's creation, with who created it.
 */
export const GUARDED_DDL = `
create schema if not exists lean_guarded;
create table if not exists lean_guarded.runs (
  id text primary key,
  workspace_id text not null,
  message text not null,
  status text not null default 'pending',
  version int not null default 1,
  created_at timestamptz not null default clock_timestamp(),
  applied_at timestamptz
);
create table if not exists lean_guarded.stages (
  id text primary key,
  run_id text not null references lean_guarded.runs (id),
  stage text not null,
  ordinal int not null,
  status text not null,
  open_results int not null
);
create index if not exists stages_run_ordinal on lean_guarded.stages (run_id, ordinal);
create table if not exists lean_guarded.results (
  id text primary key,
  stage_id text not null references lean_guarded.stages (id),
  run_id text not null,
  task_name text not null,
  task_url text not null,
  enforcement_level text not null,
  status text not null,
  message text,
  attempts int not null default 0,
  next_attempt_at timestamptz,
  acknowledged_at timestamptz,
  progress_deadline timestamptz,
  hard_deadline timestamptz,
  updated_at timestamptz
);
create index if not exists results_stage on lean_guarded.results (stage_id);
create table if not exists lean_guarded.attempts (
  result_id text not null references lean_guarded.results (id),
  attempt int not null,
  started_at timestamptz not null,
  duration_ms int not null default 0,
  http_status int,
  error_kind text,
  primary key (result_id, attempt)
);
create table if not exists lean_guarded.outbox (
  id bigserial primary key,
  topic text not null,
  aggregate_id text not null,
  created_at timestamptz not null default now(),
  published_at timestamptz
);
create index if not exists outbox_unpublished on lean_guarded.outbox (id) where published_at is null;
create table if not exists lean_guarded.run_events (
  id bigserial primary key,
  run_id text not null references lean_guarded.runs (id),
  action text not null,
  actor text not null,
  created_at timestamptz not null default now()
);
create index if not exists run_events_run on lean_guarded.run_events (run_id);
`;

export const GUARDED_TABLES: RunTables = {
  progress: `select count(*) filter (where status = 'applied') as ok, 0 as failed, count(*) as total from lean_guarded.runs`,
  seconds: `select extract(epoch from max(applied_at) - min(created_at))::float8 as seconds from lean_guarded.runs where status = 'applied'`,
  unfinished: `select count(*) as open from lean_guarded.runs where status <> 'applied'`,
  applied: `select id, extract(epoch from applied_at) * 1000 as applied from lean_guarded.runs`,
  truncate:
    'truncate lean_guarded.runs, lean_guarded.stages, lean_guarded.results, lean_guarded.attempts, lean_guarded.outbox, lean_guarded.run_events',
};

/** A result's progress deadline and hard deadline, in seconds from its start (the service's defaults). */
export const GUARDED_DEADLINES = { progressSeconds: 600, hardSeconds: 3600, leaseSeconds: 30 } as const;
