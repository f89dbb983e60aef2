import type { Pool, PoolClient } from 'pg';
import { inTransaction, type Queryable } from '../db/prepared.ts';
import { DB_NOW_ISO } from '../db/sql.ts';
import {
  decideLock,
  decideUnlock,
  holdingSince,
  planForceExecute,
  RELEASED_RUN_STATUSES,
  type ForceExecutePlan,
  type LockDecision,
  type LockOwner,
  type LockState,
  type QueuedRun,
  type QueueState,
  type QueueView,
} from '../domain/run-queue.ts';
import type { RunStatus } from '../domain/statuses.ts';
import type { ActedBy } from '../domain/run-events.ts';
import { statusTimestampKey } from '../domain/timestamps.ts';
import { JOBS, OUTBOX_CHANNEL } from '../queue/names.ts';
import { recordRunEvent } from './run-events.ts';

/**
 * The workspace run queue's statements (its rules are shared/src/domain/run-queue.ts). Admission is
 * atomic: it takes the workspace row's lock (so admissions, locks and unlocks of one workspace follow
 * each other), then admits the oldest waiting run where nothing holds the workspace, with its wake-up in
 * the outbox, in one transaction. The unique index `runs_workspace_holder_idx` stands behind it: no
 * second holder can ever be written. A release (a holder ending) admits the next run after its own
 * commit; a crash in between is repaired by the sweeper's `admitStalledQueues`.
 */

/** SQL: the run aliased `alias` holds its workspace (the unique index's predicate, a column PostgreSQL keeps: run.entity.ts). */
export const holdingSql = (alias: string): string => `${alias}.holds_workspace`;
/** SQL: the run aliased `alias` waits in its workspace's queue (the queued runs' index's predicate, likewise). */
export const waitingSql = (alias: string): string => `${alias}.waits_in_queue`;

/**
 * SQL: whether a new run on the workspace row aliased `w` has to wait: a person locked it, a run holds
 * it, or runs already wait there (they go first).
 */
export const queueBusySql = (w: string): string =>
  `(${w}.lock_kind is not null or exists (select 1 from runs qb where qb.workspace_id = ${w}.id and ((${holdingSql('qb')}) or (${waitingSql('qb')}))))`;

/**
 * Admits the oldest waiting run of workspace $1 where no run holds it, with its `run.advance` outbox
 * event and NOTIFY ($2 the channel). Run after the workspace row's lock, so its snapshot sees every
 * admission before it. Returns the admitted run's id (no row where none).
 */
const ADMIT_SQL = `with next as (
    select q.id from runs q
     where q.workspace_id = $1 and ${waitingSql('q')}
       and not exists (select 1 from runs h where h.workspace_id = $1 and ${holdingSql('h')})
     order by q.created_at, q.id limit 1),
  admitted as (
    update runs r set queue_state = 'holding', version = r.version + 1, updated_at = now()
      from next where r.id = next.id and ${waitingSql('r')} returning r.id),
  event as (
    insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts)
    select '${JOBS.runAdvance}', id, jsonb_build_object('runId', id), now(), 0 from admitted returning aggregate_id)
  select aggregate_id as id, pg_notify($2, aggregate_id) from event`;

const isHolderConflict = (error: unknown): boolean =>
  (error as { code?: unknown; constraint?: unknown }).code === '23505' &&
  (error as { constraint?: unknown }).constraint === 'runs_workspace_holder_idx';

/** Locks the workspace row; its person's lock, or undefined where the workspace is gone. */
async function lockWorkspaceRow(client: PoolClient, workspaceId: string): Promise<{ lock_kind: string | null } | undefined> {
  const { rows } = await client.query<{ lock_kind: string | null }>('select lock_kind from workspaces where id = $1 for update', [
    workspaceId,
  ]);
  return rows[0];
}

async function admitIn(client: PoolClient, workspaceId: string): Promise<string | null> {
  const { rows } = await client.query<{ id: string }>(ADMIT_SQL, [workspaceId, OUTBOX_CHANNEL]);
  return rows[0]?.id ?? null;
}

/**
 * Admits the next waiting run of the workspace, if it is free (no person's lock, no holder): one
 * transaction. Safe to call any number of times, from anywhere, concurrently. Returns the run admitted.
 */
export async function admitNext(pool: Pool, workspaceId: string): Promise<string | null> {
  try {
    return await inTransaction(pool, async (client) => {
      const workspace = await lockWorkspaceRow(client, workspaceId);
      if (!workspace || workspace.lock_kind !== null) return null;
      return admitIn(client, workspaceId);
    });
  } catch (error) {
    // Another admission won (it can only be one that did not take the workspace lock: none here does).
    if (isHolderConflict(error)) return null;
    throw error;
  }
}

/** What the release hooks need of a run: its workspace and queue state, and its status before and after a write. */
export interface ReleaseSubject {
  workspaceId: string;
  queueState: QueueState | null;
  from: RunStatus;
  to: RunStatus;
}

/**
 * The hooks below run after their caller's own commit, which stands whatever they do: they never
 * throw. An admission they could not make (the database went away meanwhile) is the sweeper's to
 * repair (`admitStalledQueues`), within its interval; failing the caller instead would answer a 500
 * for an action that took effect, or keep a worker from delivering what its write started.
 */
async function admitAfterCommit(pool: Pool, workspaceId: string): Promise<void> {
  await admitIfWaiting(pool, workspaceId).catch(() => undefined);
}

/** SQL: whether a run waits in workspace $1's queue (read without a lock). */
const ANY_WAITING_SQL = `select 1 from runs q where q.workspace_id = $1 and ${waitingSql('q')} limit 1`;

/**
 * Most releases find nothing waiting: a read without a lock or transaction settles them. A run queued
 * after this read is not lost: its creator admits after its own commit, and sees this release.
 */
async function admitIfWaiting(pool: Pool, workspaceId: string): Promise<void> {
  const { rowCount } = await pool.query(ANY_WAITING_SQL, [workspaceId]);
  if (rowCount) await admitNext(pool, workspaceId);
}

/** After a write that moved a run: where it released its workspace, the next waiting run is admitted. */
export async function admitAfterRelease(pool: Pool, run: ReleaseSubject): Promise<void> {
  if (run.queueState !== 'holding' || RELEASED_RUN_STATUSES.has(run.from) || !RELEASED_RUN_STATUSES.has(run.to)) return;
  await admitAfterCommit(pool, run.workspaceId);
}

/** After an action or creation on a run of the workspace: admits whatever may start now (for runs outside the queue, nothing). */
export async function admitAfterChange(pool: Pool, workspaceId: string, queueState: QueueState | null | undefined): Promise<void> {
  if (queueState === null || queueState === undefined) return;
  await admitAfterCommit(pool, workspaceId);
}

/** Workspaces with waiting runs and nothing holding them (a release whose admission was lost): the sweeper's repair. */
const STALLED_QUEUES_SQL = `select distinct q.workspace_id from runs q join workspaces w on w.id = q.workspace_id
   where ${waitingSql('q')} and w.lock_kind is null
     and not exists (select 1 from runs h where h.workspace_id = q.workspace_id and ${holdingSql('h')})
   limit 500`;

/** The sweeper's repair: admits the next run of every stalled queue. Returns the runs admitted. */
export async function admitStalledQueues(pool: Pool): Promise<string[]> {
  const { rows } = await pool.query<{ workspace_id: string }>(STALLED_QUEUES_SQL);
  const admitted: string[] = [];
  for (const row of rows) {
    const id = await admitNext(pool, row.workspace_id);
    if (id) admitted.push(id);
  }
  return admitted;
}

/** The lock state of these workspaces (a person's lock, the holding run), for `locked` and `locked-by`: one query. */
export async function workspaceLockStates(db: Queryable, workspaceIds: readonly string[]): Promise<Map<string, LockState>> {
  if (workspaceIds.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; lock_kind: 'teams' | 'users' | null; lock_owner_id: string | null; holder: string | null }>(
    `select w.id, w.lock_kind, w.lock_owner_id, h.id as holder from workspaces w
       left join runs h on h.workspace_id = w.id and ${holdingSql('h')}
      where w.id = any($1::text[])`,
    [workspaceIds],
  );
  return new Map(rows.map((row) => [row.id, lockStateOf(row)]));
}

const lockStateOf = (row: { lock_kind: 'teams' | 'users' | null; lock_owner_id: string | null; holder: string | null }): LockState => ({
  owner: row.lock_kind && row.lock_owner_id ? { kind: row.lock_kind, id: row.lock_owner_id } : null,
  holderRunId: row.holder,
});

/** The workspace's lock state, with its row locked. */
async function lockedState(client: PoolClient, workspaceId: string): Promise<LockState | undefined> {
  const workspace = await lockWorkspaceRow(client, workspaceId);
  if (!workspace) return undefined;
  return (await workspaceLockStates(client, [workspaceId])).get(workspaceId);
}

/** `actions/lock`: locks the workspace for `owner` where nothing holds it. */
export async function lockWorkspace(pool: Pool, workspaceId: string, owner: LockOwner, reason: string): Promise<LockDecision> {
  return inTransaction(pool, async (client) => {
    const state = await lockedState(client, workspaceId);
    if (!state) return { ok: false, detail: 'The workspace is gone.' };
    const decision = decideLock(state);
    if (!decision.ok) return decision;
    await client.query(`update workspaces set lock_kind = $2, lock_owner_id = $3, lock_reason = $4, updated_at = now() where id = $1`, [
      workspaceId,
      owner.kind,
      owner.id,
      reason,
    ]);
    return decision;
  });
}

/** `actions/unlock` and `actions/force-unlock`: takes a person's lock off, and admits the next waiting run in the same transaction. */
export async function unlockWorkspace(pool: Pool, workspaceId: string, caller: LockOwner, force: boolean): Promise<LockDecision> {
  return inTransaction(pool, async (client) => {
    const state = await lockedState(client, workspaceId);
    if (!state) return { ok: false, detail: 'The workspace is gone.' };
    const decision = decideUnlock(state, caller, force);
    if (!decision.ok) return decision;
    await client.query(
      `update workspaces set lock_kind = null, lock_owner_id = null, lock_reason = null, updated_at = now() where id = $1`,
      [workspaceId],
    );
    await admitIn(client, workspaceId);
    return decision;
  });
}

const CANCELED_AT = `jsonb_build_object('canceled-at', ${DB_NOW_ISO})`;

/** Ends a run ahead of a force-executed one, where it is still as read: its open results and stages end `canceled`, as a cancel or discard ends them. */
async function endRunAhead(client: PoolClient, runId: string, from: RunStatus, to: RunStatus): Promise<boolean> {
  const { rowCount } = await client.query(
    `update runs set status = $3, status_timestamps = status_timestamps || jsonb_build_object($4::text, ${DB_NOW_ISO}),
            version = version + 1, updated_at = now() where id = $1 and status = $2`,
    [runId, from, to, statusTimestampKey(to)],
  );
  if (rowCount !== 1) return false;
  await client.query(
    // Locked in id order, as the sweeper and run actions lock them, so none of them deadlock.
    `with open_results as (
       select tr.id from task_results tr join task_stages ts on ts.id = tr.task_stage_id
        where ts.run_id = $1 and tr.status in ('pending', 'running') order by tr.id for update of tr)
     update task_results tr set status = 'canceled', status_timestamps = tr.status_timestamps || ${CANCELED_AT},
            version = tr.version + 1, updated_at = now()
       from open_results where tr.id = open_results.id and tr.status in ('pending', 'running')`,
    [runId],
  );
  await client.query(
    `update task_stages set status = 'canceled', status_timestamps = status_timestamps || ${CANCELED_AT}, version = version + 1, updated_at = now()
      where run_id = $1 and status in ('pending', 'running', 'awaiting_override')`,
    [runId],
  );
  return true;
}

const WAKE_SQL = `with event as (
    insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts)
    select '${JOBS.runAdvance}', id, jsonb_build_object('runId', id), now(), 0 from unnest($1::text[]) as t(id) returning aggregate_id)
  select pg_notify($2, aggregate_id) from event`;

/** The workspace's runs that the queue counts (holder, waiting runs) and `runId`, in creation order. */
const QUEUE_SNAPSHOT_SQL = `select id, status, queue_state from runs
   where workspace_id = $1 and ((${holdingSql('runs')}) or (${waitingSql('runs')}) or id = $2) order by created_at, id`;

/**
 * `actions/force-execute`: in one transaction, under the workspace row's lock, discards (or cancels)
 * every run ahead of this one and admits it. Returns the plan it carried out, or why it refused (then
 * nothing changed). A run ahead that moved since the read makes the whole of it roll back (`moved`).
 */
export async function forceExecute(
  pool: Pool,
  runId: string,
  by: ActedBy,
): Promise<ForceExecutePlan | { ok: false; reason: 'moved'; detail: string }> {
  const moved = { ok: false as const, reason: 'moved' as const, detail: 'The workspace queue changed meanwhile; try again.' };
  class Moved extends Error {}
  try {
    return await inTransaction(pool, async (client) => {
      const { rows: found } = await client.query<{ workspace_id: string }>('select workspace_id from runs where id = $1', [runId]);
      const workspaceId = found[0]?.workspace_id;
      const workspace = workspaceId === undefined ? undefined : await lockWorkspaceRow(client, workspaceId);
      if (workspaceId === undefined || !workspace) return { ok: false, reason: 'not-pending', detail: 'The run is gone.' };
      const { rows } = await client.query<{ id: string; status: RunStatus; queue_state: QueueState | null }>(QUEUE_SNAPSHOT_SQL, [
        workspaceId,
        runId,
      ]);
      const runs: QueuedRun[] = rows.map((row) => ({ id: row.id, status: row.status, queueState: row.queue_state }));
      const plan = planForceExecute({ userLocked: workspace.lock_kind !== null, runs }, runId);
      if (!plan.ok) return plan;
      for (const end of plan.ends) if (!(await endRunAhead(client, end.runId, end.from, end.to))) throw new Moved();
      const admitted = await client.query(
        `update runs set queue_state = 'holding', version = version + 1, updated_at = now() where id = $1 and ${waitingSql('runs')}`,
        [runId],
      );
      if (admitted.rowCount !== 1) throw new Moved();
      await client.query(WAKE_SQL, [[...plan.ends.map((end) => end.runId), runId], OUTBOX_CHANNEL]);
      // Who did it: on each run it ended, and on this one with the comment.
      for (const end of plan.ends) {
        const description = `Ended so that ${runId} could start (force-execute)`;
        await recordRunEvent(client, end.runId, { action: end.to, actorId: by.actorId, description });
      }
      await recordRunEvent(client, runId, { action: 'force_executed', ...by });
      return plan;
    });
  } catch (error) {
    if (error instanceof Moved || isHolderConflict(error)) return moved;
    throw error;
  }
}

/**
 * Creates a run in its place in the queue (`create` is the one statement that creates it): a run that
 * would hold the workspace at once, where another creation won the place meanwhile (the unique index
 * refuses a second holder), is created waiting instead. Returns what `create` returned and the place.
 */
export async function createInQueue<T>(
  queue: QueueState | null,
  create: (queue: QueueState | null) => Promise<T>,
): Promise<{ created: T; queue: QueueState | null }> {
  try {
    return { created: await create(queue), queue };
  } catch (error) {
    if (queue !== 'holding' || !isHolderConflict(error)) throw error;
    return { created: await create('queued'), queue: 'queued' };
  }
}

interface QueueViewRow {
  id: string;
  lock_kind: 'teams' | 'users' | null;
  lock_owner_id: string | null;
  lock_reason: string | null;
  holder_id: string | null;
  holder_status: RunStatus | null;
  holder_timestamps: Record<string, string> | null;
  holder_created_at: Date | null;
  holder_created_by: string | null;
  holder_message: string | null;
  waiting: string | null;
}

/** These workspaces' queues as their waiting runs see them (run-queue.ts `waitingFor`): one statement. */
export async function queueViews(db: Queryable, workspaceIds: readonly string[]): Promise<Map<string, QueueView>> {
  if (workspaceIds.length === 0) return new Map();
  const { rows } = await db.query<QueueViewRow>(
    `select w.id, w.lock_kind, w.lock_owner_id, w.lock_reason, h.id as holder_id, h.status as holder_status,
            h.status_timestamps as holder_timestamps, h.created_at as holder_created_at, h.created_by as holder_created_by,
            h.message as holder_message,
            (select string_agg(q.id, ',' order by q.created_at, q.id) from runs q where q.workspace_id = w.id and ${waitingSql('q')}) as waiting
       from workspaces w left join runs h on h.workspace_id = w.id and ${holdingSql('h')}
      where w.id = any($1::text[])`,
    [workspaceIds],
  );
  return new Map(rows.map((row) => [row.id, queueViewOf(row)]));
}

function queueViewOf(row: QueueViewRow): QueueView {
  const holder =
    row.holder_id === null
      ? null
      : {
          id: row.holder_id,
          status: row.holder_status as RunStatus,
          since: holdingSince(row.holder_timestamps ?? {}, new Date(row.holder_created_at ?? 0).toISOString()),
          createdBy: row.holder_created_by,
          message: row.holder_message ?? '',
        };
  return {
    lock: row.lock_kind && row.lock_owner_id ? { kind: row.lock_kind, id: row.lock_owner_id, reason: row.lock_reason } : null,
    holder,
    waitingRunIds: row.waiting ? row.waiting.split(',') : [],
  };
}
