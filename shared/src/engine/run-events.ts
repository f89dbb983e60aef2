import { prepared, runPrepared, type Queryable } from '../db/prepared.ts';
import { newId } from '../domain/ids.ts';
import type { ActedBy, RunEventAction } from '../domain/run-events.ts';

/** An event to record with the action it belongs to. */
export interface RunEventInput extends ActedBy {
  action: RunEventAction;
  /** The task stage an override was for. */
  taskStageId?: string | null;
  /** A sentence for people, where the action alone does not say enough. */
  description?: string | null;
}

/** What was recorded: the event and, where one was given, its comment. */
export interface RecordedRunEvent {
  id: string;
  commentId: string | null;
  createdAt: Date;
}

/**
 * A run event and the comment given with it, in one statement (docs/design.md, "Who did what"): the
 * comment is a run comment, as HCP keeps them, and the event links it. Both take the database's clock.
 * $1 event id, $2 run, $3 action, $4 actor's user id, $5 comment id, $6 comment (null: none),
 * $7 task stage, $8 description.
 */
const RECORD_RUN_EVENT = prepared(
  'record-run-event',
  `with comment as (
     insert into run_comments (id, run_id, body, created_by, created_at)
     select $5, $2, $6::text, $4, now() where $6::text is not null
     returning id)
   insert into run_events (id, run_id, action, actor_id, comment_id, task_stage_id, description, created_at)
   values ($1, $2, $3, $4, (select id from comment), $7, $8, now())
   returning id, comment_id, created_at`,
);

/**
 * Records who did what to a run. Called by the engine's actions on the client of their own
 * transaction, after the action took effect, so the event commits with the action or not at all.
 */
export async function recordRunEvent(db: Queryable, runId: string, event: RunEventInput): Promise<RecordedRunEvent> {
  const comment = event.comment ? event.comment : null;
  const [row] = await runPrepared<{ id: string; comment_id: string | null; created_at: Date }>(db, RECORD_RUN_EVENT, [
    newId('runEvent'),
    runId,
    event.action,
    event.actorId,
    comment === null ? null : newId('comment'),
    comment,
    event.taskStageId ?? null,
    event.description ?? null,
  ]);
  if (!row) throw new Error(`run event of ${runId} not recorded`);
  return { id: row.id, commentId: row.comment_id, createdAt: new Date(row.created_at) };
}

/**
 * The same event as a CTE named `recorded` of a statement whose CTE `source` returns the acted-on run
 * (one row, its `id`, or none): for an action that is one statement, so the event is written only where
 * the action's update matched. `add` numbers the parameters. An event recorded so carries no comment.
 */
export function recordRunEventsSql(source: string, event: RunEventInput, add: (value: unknown) => string): string {
  return `recorded as (insert into run_events (id, run_id, action, actor_id, task_stage_id, description, created_at)
    select ${add(newId('runEvent'))}, id, ${add(event.action)}, ${add(event.actorId)}, ${add(event.taskStageId ?? null)}, ${add(event.description ?? null)}, now()
      from ${source})`;
}
