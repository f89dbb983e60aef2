import type { Queryable } from '@runtasks/shared/db';
import { notFound } from '@runtasks/shared/errors';
import { readableWorkspaceParams, readableWorkspaceSql, RUN_ROW } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';

/** A run event as the API shows it, with its comment's body where it has one. */
export interface RunEventView {
  id: string;
  runId: string;
  action: string;
  actorId: string | null;
  description: string | null;
  createdAt: Date;
  comment: { id: string; body: string; createdAt: Date } | null;
}

interface RunEventRow {
  id: string;
  run_id: string;
  action: string;
  actor_id: string | null;
  description: string | null;
  created_at: Date | string;
  comment_id: string | null;
  comment_body: string | null;
  comment_created_at: Date | string | null;
}

const SELECT = `select e.id, e.run_id, e.action, e.actor_id, e.description, e.created_at,
                       c.id as comment_id, c.body as comment_body, c.created_at as comment_created_at
                  from run_events e join runs r on r.id = e.run_id left join run_comments c on c.id = e.comment_id`;

function view(row: RunEventRow): RunEventView {
  return {
    id: row.id,
    runId: row.run_id,
    action: row.action,
    actorId: row.actor_id,
    description: row.description,
    createdAt: new Date(row.created_at),
    comment:
      row.comment_id === null
        ? null
        : { id: row.comment_id, body: row.comment_body ?? '', createdAt: new Date(row.comment_created_at ?? row.created_at) },
  };
}

/** A run's events, oldest first (the run has been found readable by the caller): one query, comments joined. */
export async function runEvents(db: Queryable, runId: string): Promise<RunEventView[]> {
  const { rows } = await db.query<RunEventRow>(`${SELECT} where e.run_id = $1 order by e.created_at, e.id`, [runId]);
  return rows.map(view);
}

/** A run event the caller may read: its run's workspace scope is checked in the same query (404 otherwise). */
export async function findRunEvent(ctx: ApiContext, id: string): Promise<RunEventView> {
  const [organizationId, teamId] = readableWorkspaceParams(ctx.state.principal, 'runs:read');
  const { rows } = await (
    await poolOf(ctx)
  ).query<RunEventRow>(`${SELECT} where e.id = $1 and ${readableWorkspaceSql(RUN_ROW, 2, 3)}`, [id, organizationId, teamId]);
  const row = rows[0];
  if (!row) throw notFound();
  return view(row);
}
