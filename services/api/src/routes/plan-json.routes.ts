import type { FilterQuery } from '@mikro-orm/core';
import { Run } from '@runtasks/shared/db';
import type { ApiContext } from '../context.ts';
import { boundedDownload } from '../ops/download-slots.ts';
import { orNotFound, type RouteDef } from './define.ts';
import { findRun } from '../services/run-lookup.service.ts';
import { removedByRetention, sendBytes, sendObject } from '../services/stored-object.service.ts';

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
    // A reported plan: its bytes as reported, streamed from storage.
    const key = run.planObject?.key;
    if (key && (await sendObject(ctx, key, 'application/json'))) return;
    if (key || run.planJsonSha256) throw removedByRetention("The run's plan JSON");
    // A plan given at creation (plan-json, at most a JSON body's size), or the minimal one: serialized once, with its ETag.
    await ctx.state.em.populate(run, ['planJson']);
    sendBytes(ctx, Buffer.from(JSON.stringify(run.planJson ?? minimalPlan(run.workspace.terraformVersion))), 'application/json');
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
    handler: boundedDownload(planJson((ctx) => ({ planId: ctx.params['plan_id'] ?? '' }))),
  },
  {
    method: 'GET',
    path: '/runs/:run_id/plan/json-output',
    auth: 'token-or-task',
    summary: "Download a run's plan JSON output",
    response: { status: 200, content: 'json' },
    handler: boundedDownload(planJson((ctx) => ({ id: ctx.params['run_id'] ?? '' }))),
  },
];
