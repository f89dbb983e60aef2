import type { FilterQuery } from '@mikro-orm/core';
import { notFound } from '@runtasks/shared/errors';
import { Run, TaskStage } from '@runtasks/shared/db';
import type { Principal } from '../auth/principal.ts';
import { workspaceScope, type WorkspaceNeed } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';

/** Runs are found through their workspace's scope, in the same query. */
export async function findRun(ctx: ApiContext, need: WorkspaceNeed, where: FilterQuery<Run>): Promise<Run> {
  const scope = workspaceScope(ctx.state.principal, need);
  if (!scope) throw notFound();
  const run = await ctx.state.em.findOne(Run, { $and: [where, { workspace: scope }] } as FilterQuery<Run>, { populate: ['workspace'] });
  if (!run) throw notFound();
  return run;
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
  if (principal.kind === 'team') return principal.organizationId === organizationId && principal.managePolicyOverrides;
  return principal.kind === 'admin' || principal.organizationId === organizationId;
}
