import type { FilterQuery } from '@mikro-orm/core';
import { ApiError, conflict, notFound } from '@runtasks/shared/errors';
import { readPlan } from '@runtasks/shared/domain';
import { Run } from '@runtasks/shared/db';
import { z } from 'zod';
import type { WorkspaceNeed } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { readRawBody } from '../http/raw-body.ts';
import { serializeApply, serializePlan } from '../serializers/execution.serializer.ts';
import { reportTransition, takeReport, type ExecutionReport } from '../services/execution-report.service.ts';
import { respond, type RouteDef } from './define.ts';
import { findRun } from '../services/run-lookup.service.ts';
import { MAX_PLAN_DEPTH, nestsDeeperThan, someString } from './schemas.ts';
import { safeText } from './schemas.ts';

type Where = (ctx: ApiContext) => FilterQuery<Run>;
const byRun: Where = (ctx) => ({ id: ctx.params['run_id'] ?? '' });
const byPlan: Where = (ctx) => ({ planId: ctx.params['plan_id'] ?? '' });
const byApply: Where = (ctx) => ({ applyId: ctx.params['apply_id'] ?? '' });

function showPlan(where: Where) {
  return async (ctx: ApiContext): Promise<void> => respond(ctx, 200, single(serializePlan(await findRun(ctx, 'runs:read', where(ctx)))));
}

function showApply(where: Where) {
  return async (ctx: ApiContext): Promise<void> => respond(ctx, 200, single(serializeApply(await findRun(ctx, 'runs:read', where(ctx)))));
}

const notAllowed = (detail: string): ApiError => conflict(detail, 'transition not allowed');

/**
 * The run a report is for, as the caller may plan (or apply) on its workspace: 404 otherwise. A run of
 * a remote workspace, or one not waiting for this report, is a 409 before its body is read.
 */
async function reportedRun(ctx: ApiContext, need: WorkspaceNeed, where: Where, report: ExecutionReport['kind']): Promise<Run> {
  const run = await findRun(ctx, need, where(ctx));
  const what = report.startsWith('plan') ? 'plan' : 'apply';
  if (run.executionMode !== 'local')
    throw notAllowed(`The run's workspace executes remotely: its ${what} is the service's own, and is not reported.`);
  const { from } = reportTransition(report);
  if (run.status !== from) throw notAllowed(`A run that is ${run.status} takes no ${what} report: only a run that is ${from} does.`);
  return run;
}

/** Records the report, or 409 where the run moved meanwhile; answers with the plan's or apply's document as it is now. */
async function take(ctx: ApiContext, run: Run, report: ExecutionReport): Promise<void> {
  if (!(await takeReport(await poolOf(ctx), run.id, report)))
    throw notAllowed('The run changed concurrently and no longer takes this report.');
  const updated = await ctx.state.em.fork().findOne(Run, { id: run.id });
  if (!updated) throw notFound();
  respond(ctx, 200, single(report.kind.startsWith('plan') ? serializePlan(updated) : serializeApply(updated)));
}

/** The body of a plan report: the raw `terraform show -json` output, as JSON, within PLAN_JSON_MAX_BYTES. */
async function planDocument(ctx: ApiContext): Promise<{ text: string; value: unknown }> {
  const type = (ctx.request.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json')
    throw new ApiError(415, 'unsupported media type', 'Send the plan JSON with Content-Type: application/json.');
  const text = (await readRawBody(ctx.req, ctx.deps.config.planJsonMaxBytes)).toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ApiError(400, 'malformed JSON', 'The request body is not valid JSON.', { pointer: '' });
  }
  // PostgreSQL's jsonb holds neither NUL nor an unpaired surrogate, and deep nesting overflows serializers.
  if (someString(value, (item) => item.includes('\u0000') || !item.isWellFormed()))
    throw new ApiError(422, 'invalid plan', 'The plan must not contain NUL characters or unpaired surrogates.', { pointer: '' });
  if (nestsDeeperThan(value, MAX_PLAN_DEPTH))
    throw new ApiError(422, 'invalid plan', `The plan must not nest deeper than ${MAX_PLAN_DEPTH} levels.`, { pointer: '' });
  return { text, value };
}

function reportPlan(where: Where) {
  return async (ctx: ApiContext): Promise<void> => {
    const run = await reportedRun(ctx, 'runs:plan', where, 'plan');
    const { text, value } = await planDocument(ctx);
    const reading = readPlan(value);
    if (!reading.ok) throw new ApiError(422, 'invalid plan', reading.detail, { pointer: reading.pointer });
    await take(ctx, run, { kind: 'plan', planJson: text, summary: reading.summary });
  };
}

const errorSchema = z.object({ message: safeText(10_000).min(1, 'must not be empty') });
// As the run actions' bodies (HCP's take a comment): none, `{}`, or a comment, which is not kept.
// Not a union with z.undefined(): a union reports any failure at the document root, losing the pointer.
const finishSchema = z.object({ comment: safeText(10_000).nullable().optional() }).optional();

function reportError(where: Where, kind: 'plan-errored' | 'apply-errored') {
  return async (ctx: ApiContext): Promise<void> => {
    const { message } = parseWith(errorSchema, ctx.request.body);
    const run = await reportedRun(ctx, kind === 'plan-errored' ? 'runs:plan' : 'runs:apply', where, kind);
    await take(ctx, run, { kind, message });
  };
}

function reportApply(where: Where) {
  return async (ctx: ApiContext): Promise<void> => {
    parseWith(finishSchema, ctx.request.body);
    await take(ctx, await reportedRun(ctx, 'runs:apply', where, 'apply'), { kind: 'apply' });
  };
}

/** The same route under a plan's (or apply's) own id and under its run's id. */
function both(own: string, ofRun: string, ownWhere: Where, route: (where: Where) => Omit<RouteDef, 'path'>): RouteDef[] {
  return [
    { ...route(ownWhere), path: own },
    { ...route(byRun), path: ofRun },
  ];
}

const documentResponse = { status: 200 };

/** What every report's description says: when it is taken. */
const REPORT_RULES =
  "For runs of workspaces whose execution-mode is local, while the run is planning (a pipeline runs Terraform and reports here; HCP has no such endpoint). A run in any other status, a repeated report, or a run of a remote workspace: 409 'transition not allowed', nothing changed.";
const APPLY_RULES =
  "For runs of workspaces whose execution-mode is local, while the run is applying. A run in any other status, a repeated report, or a run of a remote workspace: 409 'transition not allowed', nothing changed. Needs permission to apply on the workspace.";

export const executionRoutes: RouteDef[] = [
  ...both('/plans/:plan_id', '/runs/:run_id/plan', byPlan, (where) => ({
    method: 'GET',
    auth: 'token',
    summary: "Show a run's plan (status, timestamps, resource counts)",
    handler: showPlan(where),
  })),
  ...both('/applies/:apply_id', '/runs/:run_id/apply', byApply, (where) => ({
    method: 'GET',
    auth: 'token',
    summary: "Show a run's apply",
    handler: showApply(where),
  })),
  ...both('/plans/:plan_id/json-output', '/runs/:run_id/plan/json-output', byPlan, (where) => ({
    method: 'PUT',
    auth: 'token',
    body: 'raw',
    summary: "Report a local run's plan: the output of `terraform show -json <planfile>`",
    rawBody: {
      mediaType: 'application/json',
      description: 'The plan JSON exactly as `terraform show -json <planfile>` writes it, at most PLAN_JSON_MAX_BYTES (413 beyond).',
    },
    notes: `${REPORT_RULES} Needs permission to plan on the workspace. A body that is not a plan document (no format_version, or a resource_changes that is not an array of changes with actions) is a 422 whose source.pointer names the member. Answers with the plans document: status finished, has-changes and the resource counts from resource_changes.`,
    response: documentResponse,
    handler: reportPlan(where),
  })),
  ...both('/plans/:plan_id/actions/error', '/runs/:run_id/plan/actions/error', byPlan, (where) => ({
    method: 'POST',
    auth: 'token',
    summary: "Report that a local run's plan errored, with its message",
    notes: `${REPORT_RULES} Needs permission to plan. The run ends errored; the plan shows status errored and the message as error-message.`,
    requestSchema: errorSchema,
    response: documentResponse,
    handler: reportError(where, 'plan-errored'),
  })),
  ...both('/applies/:apply_id/actions/finish', '/runs/:run_id/apply/actions/finish', byApply, (where) => ({
    method: 'POST',
    auth: 'token',
    summary: "Report that a local run's apply finished",
    notes: `${APPLY_RULES} The run moves to applied, then to its post_apply tasks.`,
    requestSchema: finishSchema,
    optionalBody: true,
    response: documentResponse,
    handler: reportApply(where),
  })),
  ...both('/applies/:apply_id/actions/error', '/runs/:run_id/apply/actions/error', byApply, (where) => ({
    method: 'POST',
    auth: 'token',
    summary: "Report that a local run's apply errored, with its message",
    notes: `${APPLY_RULES} The run ends errored; the apply shows status errored and the message as error-message.`,
    requestSchema: errorSchema,
    response: documentResponse,
    handler: reportError(where, 'apply-errored'),
  })),
];
