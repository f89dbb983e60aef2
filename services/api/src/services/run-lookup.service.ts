import type { FilterQuery } from '@mikro-orm/core';
import { forbidden, notFound } from '@runtasks/shared/errors';
import { Run, TaskStage } from '@runtasks/shared/db';
import { rightsIn, type Principal } from '../auth/principal.ts';
import { isRunsNeed, NEED_PERMISSION, workspaceScope, type WorkspaceNeed } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';

async function findScopedRun(ctx: ApiContext, need: WorkspaceNeed, where: FilterQuery<Run>): Promise<Run | null> {
  const scope = workspaceScope(ctx.state.principal, need);
  if (!scope) return null;
  return ctx.state.em.findOne(Run, { $and: [where, { workspace: scope }] } as FilterQuery<Run>, { populate: ['workspace'] });
}

/**
 * Runs are found through their workspace's scope, in the same query. A caller who may read the run but
 * lacks the need is told which permission it takes (403); one who may not read it gets the 404 of a
 * run that does not exist, so nothing is learnt of runs one cannot see.
 */
export async function findRun(ctx: ApiContext, need: WorkspaceNeed, where: FilterQuery<Run>, action = 'do this'): Promise<Run> {
  const run = await findScopedRun(ctx, need, where);
  if (run) return run;
  if (!isRunsNeed(need) || !(await findScopedRun(ctx, 'runs:read', where))) throw notFound();
  throw forbidden(`This token may read the run but may not ${action}: that takes ${NEED_PERMISSION[need]}.`);
}

/** A stage the caller may read (its run's workspace scope in the same query), with its run, workspace and organization. */
export async function findStage(ctx: ApiContext, id = ctx.params['task_stage_id'] ?? ''): Promise<TaskStage> {
  const scope = workspaceScope(ctx.state.principal, 'runs:read');
  if (!scope) throw notFound();
  const where = { id, run: { workspace: scope } } as FilterQuery<TaskStage>;
  const stage = await ctx.state.em.findOne(TaskStage, where, { populate: ['run', 'run.workspace', 'run.organization'] });
  if (!stage) throw notFound();
  return stage;
}

export function canOverrideTasks(principal: Principal, organizationId: string): boolean {
  const rights = rightsIn(principal, organizationId);
  return rights !== null && (rights.owner || rights.managePolicyOverrides);
}
