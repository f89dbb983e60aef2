import type { FilterQuery } from '@mikro-orm/core';
import { Run } from '@runtasks/shared/db';
import type { ApiContext } from '../context.ts';
import { orNotFound, type RouteDef } from './define.ts';
import { findRun } from '../services/run-lookup.service.ts';

/** A minimal valid plan document for runs created without one, so task servers always have a plan to read. */
function minimalPlan(terraformVersion: string): Record<string, unknown> {
  return {
    format_version: '1.2',
    terraform_version: terraformVersion,
    planned_values: { root_module: {} },
    resource_changes: [],
    configuration: { root_module: {} },
  };
}

function planJson(where: (ctx: ApiContext) => FilterQuery<Run>) {
  return async (ctx: ApiContext): Promise<void> => {
    const access = ctx.state.taskAccess;
    // A task result's access token reads its own run's plan only; anything else is a 404.
    const run = access
      ? orNotFound(
          await ctx.state.em.findOne(Run, { $and: [where(ctx), { id: access.runId }] } as FilterQuery<Run>, { populate: ['workspace'] }),
        )
      : await findRun(ctx, 'runs:read', where(ctx));
    await ctx.state.em.populate(run, ['planJson']);
    ctx.status = 200;
    ctx.type = 'application/json';
    ctx.body = run.planJson ?? minimalPlan(run.workspace.terraformVersion);
  };
}

/** A run's plan JSON, by plan id or run id: for API tokens that read the run, and for its task results' access tokens. */
export const planJsonRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/plans/:plan_id/json-output',
    auth: 'token-or-task',
    summary: "Download a plan's JSON output (by plan id)",
    response: { status: 200, content: 'json' },
    handler: planJson((ctx) => ({ planId: ctx.params['plan_id'] ?? '' })),
  },
  {
    method: 'GET',
    path: '/runs/:run_id/plan/json-output',
    auth: 'token-or-task',
    summary: "Download a run's plan JSON output",
    response: { status: 200, content: 'json' },
    handler: planJson((ctx) => ({ id: ctx.params['run_id'] ?? '' })),
  },
];
