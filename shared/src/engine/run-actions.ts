import type { Pool } from 'pg';
import { inTransaction, type Queryable } from '../db/prepared.ts';
import type { PlanSummary } from '../domain/plan-summary.ts';
import { RUN_ACTION_EVENTS, type ActedBy, type RunEventAction } from '../domain/run-events.ts';
import { runActionSources, runActionTarget, runActionSubject, type RunAction } from '../domain/run-transitions.ts';
import type { QueueState } from '../domain/run-queue.ts';
import type { RunStage, RunStatus, TaskStageStatus } from '../domain/statuses.ts';
import { statusTimestampKey } from '../domain/timestamps.ts';
import { conflict } from '../errors.ts';
import { CANCEL_OPEN_RESULTS } from './results.sql.ts';
import { RECORD_CONFIRMED_BY } from './runs.sql.ts';
import { admitAfterChange } from './workspace-queue.ts';
import { recordRunEvent, recordRunEventsSql } from './run-events.ts';
import { CANCEL_OPEN_STAGES, OVERRIDE } from './stages.sql.ts';
import { Params, runTransition } from './transitions.ts';
import { wakeRunsSql } from './wake.ts';

/** What an action needs to know of the run: the rule's subject and its id. */
export interface ActionRun {
  id: string;
  status: RunStatus;
  planOnly: boolean;
  executionMode: 'remote' | 'local';
  hasChanges: boolean;
  workspaceId: string;
  /** Its place in the workspace's queue: a run that ends or leaves the queue lets the next one start. */
  queueState: QueueState | null;
}

/** runActionTarget's condition for `apply` beyond the status, in SQL: not plan-only, and a local run's plan changes something. */
const APPLICABLE = ` and not plan_only and (execution_mode <> 'local' or has_changes)`;

const verb = (action: RunAction): string => (action === 'apply' ? 'applied' : `${action}ed`);

/**
 * Applies a run action as one conditional update, so concurrent actions cannot both win, which wakes
 * the run with it; a run that is canceled or discarded takes its unfinished stages and results with it.
 * Who did it, and their comment, are recorded in the same transaction (a run event).
 */
export async function applyRunAction(pool: Pool, run: ActionRun, action: RunAction, by: ActedBy): Promise<void> {
  const target = runActionTarget(action, runActionSubject(run));
  if (!target) throw conflict(`A run that is ${run.status} cannot be ${verb(action)}.`, 'transition not allowed');
  await inTransaction(pool, async (client) => {
    const params = new Params();
    const sources = runActionSources(action).map((source) => params.add(source));
    const where = `id = ${params.add(run.id)} and status in (${sources.join(', ')})${action === 'apply' ? APPLICABLE : ''}`;
    const update = runTransition(params, { to: target, keys: [statusTimestampKey(target)], where, keep: 'latest' });
    const { rowCount } = await client.query(`with run as (${update}), ${wakeRunsSql('select id as run_id from run')}`, params.values);
    if (rowCount === 0) throw conflict(`The run changed concurrently and can no longer be ${verb(action)}.`, 'transition not allowed');
    await recordRunEvent(client, run.id, { action: RUN_ACTION_EVENTS[action], ...by });
    // Who applied the run (HCP's confirmed-by): recorded with the apply, never apart from it.
    if (action === 'apply') return void (await client.query(RECORD_CONFIRMED_BY, [by.actorId, run.id]));
    await client.query(CANCEL_OPEN_RESULTS, [run.id]);
    await client.query(CANCEL_OPEN_STAGES, [run.id]);
  });
  if (action !== 'apply') await admitAfterChange(pool, run.workspaceId, run.queueState);
}

/** A stage as an override leaves it. */
export interface OverriddenStage {
  id: string;
  run_id: string;
  stage: RunStage;
  status: TaskStageStatus;
  status_timestamps: Record<string, string>;
  created_at: Date;
  updated_at: Date;
}

/**
 * Overrides a stage awaiting override so its run goes on. One conditional update: of two concurrent
 * overrides exactly one wins, the other gets 409. The run is woken, and who overrode it with what
 * comment recorded, in the same transaction. Returns the stage as the override left it: once
 * committed, a worker may move it on before the caller answers.
 */
export async function overrideStage(pool: Pool, stage: { id: string; status: TaskStageStatus }, by: ActedBy): Promise<OverriddenStage> {
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<OverriddenStage>(OVERRIDE, [stage.id]);
    const [row] = rows;
    if (!row) throw conflict(`A task stage that is ${stage.status} cannot be overridden.`, 'transition not allowed');
    await client.query(`with ${wakeRunsSql('select $1::text as run_id')}`, [row.run_id]);
    await recordRunEvent(client, row.run_id, {
      action: 'overridden',
      taskStageId: row.id,
      description: `Overrode the ${row.stage} task stage`,
      ...by,
    });
    return row;
  });
}

/**
 * What a pipeline reports of a local run: its plan (the JSON's stored object, what it changes, the SHA-256 of the JSON
 * and of the binary plan file where given, and Terraform's error where it marked the plan errored), or
 * its apply, finished or errored.
 */
export type ExecutionReport =
  | {
      kind: 'plan';
      /** The stored object holding the plan JSON as reported (shared/src/storage). */
      planObjectKey: string;
      summary: PlanSummary;
      planJsonSha256: string;
      planFileSha256: string | null;
      /** Set where Terraform marked the plan `errored`: the plan ends errored with this message. */
      erroredMessage: string | null;
    }
  | { kind: 'plan-errored'; message: string }
  | { kind: 'apply' }
  | { kind: 'apply-errored'; message: string };

/** The status a report is taken at, and the one it moves the run to. */
export function reportTransition(report: ExecutionReport): { from: RunStatus; to: RunStatus } {
  switch (report.kind) {
    case 'plan':
      return { from: 'planning', to: report.erroredMessage === null ? 'planned' : 'errored' };
    case 'plan-errored':
      return { from: 'planning', to: 'errored' };
    case 'apply':
      return { from: 'applying', to: 'applied' };
    case 'apply-errored':
      return { from: 'applying', to: 'errored' };
  }
}

/** The event each report records, and what it says. */
function reportEvent(report: ExecutionReport): { action: RunEventAction; description: string | null } {
  switch (report.kind) {
    case 'plan': {
      const { summary } = report;
      return {
        action: 'plan_reported',
        description: `Plan: ${summary.resourceAdditions} to add, ${summary.resourceChanges} to change, ${summary.resourceDestructions} to destroy`,
      };
    }
    case 'plan-errored':
      return { action: 'plan_errored', description: null };
    case 'apply':
      return { action: 'apply_reported', description: null };
    case 'apply-errored':
      return { action: 'apply_errored', description: null };
  }
}

/** The columns a report sets beside the status, as assignments with their parameters. */
function reportedColumns(params: Params, report: ExecutionReport): string[] {
  switch (report.kind) {
    case 'plan': {
      const { summary } = report;
      return [
        `plan_object_key = ${params.add(report.planObjectKey)}`,
        `plan_json_sha256 = ${params.add(report.planJsonSha256)}`,
        `plan_file_sha256 = ${params.add(report.planFileSha256)}`,
        `has_changes = ${params.add(summary.hasChanges)}`,
        `resource_additions = ${params.add(summary.resourceAdditions)}`,
        `resource_changes = ${params.add(summary.resourceChanges)}`,
        `resource_destructions = ${params.add(summary.resourceDestructions)}`,
        `resource_imports = ${params.add(summary.resourceImports)}`,
        ...(report.erroredMessage === null ? [] : [`execution_error = ${params.add(report.erroredMessage)}`]),
      ];
    }
    case 'plan-errored':
    case 'apply-errored':
      return [`execution_error = ${params.add(report.message)}`];
    case 'apply':
      return [];
  }
}

/**
 * Takes a pipeline's report of a local run, in one statement: the run moves on only from the status the
 * report belongs to (a report repeated, out of order or racing another changes nothing), and its
 * wake-up and its run event (who reported) are recorded with it. Returns whether the run moved.
 */
export async function takeReport(db: Queryable, runId: string, report: ExecutionReport, actorId: string | null): Promise<boolean> {
  const { from, to } = reportTransition(report);
  const params = new Params();
  const also = reportedColumns(params, report);
  const where = `id = ${params.add(runId)} and status = ${params.add(from)} and execution_mode = 'local'`;
  const update = runTransition(params, { to, keys: [statusTimestampKey(to)], also, where, keep: 'latest' });
  const event = recordRunEventsSql('run', { ...reportEvent(report), actorId }, (value) => params.add(value));
  const { rows } = await db.query(`with run as (${update}), ${event}, ${wakeRunsSql('select id as run_id from run')}`, params.values);
  return rows.length > 0;
}
