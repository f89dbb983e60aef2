import type { EntityManager } from '@mikro-orm/postgresql';
import type { FilterQuery } from '@mikro-orm/core';
import { notFound } from '@runtasks/shared/errors';
import { RunComment } from '@runtasks/shared/db';
import { newId } from '@runtasks/shared/domain';
import { workspaceScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';

/** A comment as the API shows it. */
export type CommentView = { id: string; body: string; createdAt: Date; run: { id: string } };

/** Comments are shown oldest first, as HCP lists them; the id breaks ties within one instant. */
const ORDER = { createdAt: 'asc', id: 'asc' } as const;

/** Stores a comment on a run (the caller has found the run with the right it needs). */
export async function addRunComment(em: EntityManager, runId: string, body: string, createdBy: string): Promise<CommentView> {
  const comment = { id: newId('comment'), body, createdAt: new Date() };
  // A native insert: the unit of work may hold the run just acted on, which must not be flushed here.
  await em.insert(RunComment, { ...comment, run: runId, createdBy });
  return { ...comment, run: { id: runId } };
}

/**
 * Stores the comment given to a run action or a stage override, once the action has taken effect: as in
 * HCP, it becomes a comment on the run. An absent, null or empty comment stores nothing.
 */
export async function recordActionComment(
  em: EntityManager,
  runId: string,
  comment: string | null | undefined,
  createdBy: string,
): Promise<void> {
  if (comment) await addRunComment(em, runId, comment, createdBy);
}

/** The comments' ids of each run, oldest first: one query for a page of runs. */
export async function commentIdsOf(em: EntityManager, runIds: readonly string[]): Promise<Map<string, string[]>> {
  const byRun = new Map<string, string[]>(runIds.map((id) => [id, []]));
  if (runIds.length === 0) return byRun;
  const comments = await em.find(RunComment, { run: { $in: [...runIds] } }, { orderBy: ORDER, fields: ['id', 'run'] });
  for (const comment of comments) byRun.get(comment.run.id)?.push(comment.id);
  return byRun;
}

/** A run's comments, oldest first (the run has been found readable by the caller). */
export async function runComments(em: EntityManager, runId: string): Promise<CommentView[]> {
  return em.find(RunComment, { run: runId }, { orderBy: ORDER });
}

/** A comment the caller may read: its run's workspace scope is checked in the same query. */
export async function findComment(ctx: ApiContext, id: string): Promise<CommentView> {
  const scope = workspaceScope(ctx.state.principal, 'runs:read');
  if (!scope) throw notFound();
  const where = { id, run: { workspace: scope } } as FilterQuery<RunComment>;
  const comment = await ctx.state.em.findOne(RunComment, where);
  if (!comment) throw notFound();
  return comment;
}
