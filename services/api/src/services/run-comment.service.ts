import type { EntityManager } from '@mikro-orm/postgresql';
import type { FilterQuery } from '@mikro-orm/core';
import { notFound } from '@runtasks/shared/errors';
import { nativePool, RunComment } from '@runtasks/shared/db';
import { recordRunEvent } from '@runtasks/shared/engine';
import { workspaceScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';

/** A comment as the API shows it. */
export type CommentView = { id: string; body: string; createdAt: Date; run: { id: string } };

/** Comments are shown oldest first, as HCP lists them; the id breaks ties within one instant. */
const ORDER = { createdAt: 'asc', id: 'asc' } as const;

/**
 * Stores a comment on a run (the caller has found the run with the right it needs), with its
 * `commented` run event, in one statement of the engine's. The comments given to run actions and
 * stage overrides are stored by the engine with those actions.
 */
export async function addRunComment(em: EntityManager, runId: string, body: string, createdBy: string): Promise<CommentView> {
  const event = await recordRunEvent(await nativePool(em), runId, { action: 'commented', actorId: createdBy, comment: body });
  return { id: event.commentId ?? '', body, createdAt: event.createdAt, run: { id: runId } };
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
