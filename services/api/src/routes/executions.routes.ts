import type { FilterQuery } from '@mikro-orm/core';
import { actorId } from '../auth/actor.ts';
import { ApiError, conflict } from '@runtasks/shared/errors';
import { readPlan, type IncomingReport, type PlanReading } from '@runtasks/shared/domain';
import { Run } from '@runtasks/shared/db';
import { z } from 'zod';
import type { WorkspaceNeed } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import type { PutResult } from '@runtasks/shared/storage';
import { parseJsonBytes, type JsonDocumentKind } from '../http/json-input.ts';
import { type BodyLimit } from '../http/raw-body.ts';
import { discardObjects, readStored, storeRequestBody } from '../services/stored-object.service.ts';
import { serializeApply, serializePlan } from '../serializers/execution.serializer.ts';
import { PLAN_FILE_SHA256_HEADER, planFileSha256Of, reportExecution, type ExecutionReport } from '../services/execution-report.service.ts';
import { orNotFound, respond, type RouteDef } from './define.ts';
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

/** The report kinds, as the words a 403 uses for what the caller may not do. */
const REPORT_ACTION: Record<IncomingReport['kind'], string> = {
  plan: "report the run's plan",
  'plan-errored': "report the run's plan",
  apply: "report the run's apply",
  'apply-errored': "report the run's apply",
};

/**
 * The run a report is for, as the caller may plan (or apply) on its workspace: 404 where it may not see
 * the run, 403 naming the permission where it may only read it. A run of a remote workspace is a 409
 * before its body is read.
 */
async function reportedRun(ctx: ApiContext, need: WorkspaceNeed, where: Where, report: IncomingReport['kind']): Promise<Run> {
  const run = await findRun(ctx, need, where(ctx), REPORT_ACTION[report]);
  const what = report.startsWith('plan') ? 'plan' : 'apply';
  if (run.executionMode !== 'local')
    throw notAllowed(`The run's workspace executes remotely: its ${what} is the service's own, and is not reported.`);
  return run;
}

/**
 * Takes the report, answers it again (the same report was taken before: 200, the document as it is now,
 * `Idempotent-Replayed: true`), or refuses it (409: another plan or outcome, naming both; or a run that
 * does not wait for it).
 */
async function take(
  ctx: ApiContext,
  run: Run,
  incoming: IncomingReport,
  build: () => ExecutionReport | Promise<ExecutionReport>,
): Promise<boolean> {
  const reload = async (): Promise<Run> => orNotFound(await ctx.state.em.fork().findOne(Run, { id: run.id }, { populate: ['workspace'] }));
  const { taken, run: updated } = await reportExecution(await poolOf(ctx), run, incoming, build, reload, actorId(ctx.state.principal));
  if (!taken) ctx.set('Idempotent-Replayed', 'true');
  respond(ctx, 200, single(incoming.kind.startsWith('plan') ? serializePlan(updated) : serializeApply(updated)));
  return taken;
}

const PLAN_JSON: JsonDocumentKind = { title: 'invalid plan', what: 'The plan JSON' };
const PLAN_JSON_LIMIT: BodyLimit = { what: 'The plan JSON', setting: 'PLAN_JSON_MAX_BYTES' };

/**
 * The body of a plan report, streamed into storage as its bytes (the raw `terraform show -json` output,
 * within PLAN_JSON_MAX_BYTES and the organization's quota) with their SHA-256, computed on the way: the
 * one hash a repeated report is compared by and the plan is served under (ETag).
 */
async function storePlan(ctx: ApiContext, run: Run): Promise<PutResult> {
  const type = (ctx.request.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json')
    throw new ApiError(415, 'unsupported media type', 'Send the plan JSON with Content-Type: application/json.');
  const owner = { organizationId: run.organization.id, workspaceId: run.workspace.id, kind: 'plan-json' as const };
  return storeRequestBody(ctx, owner, ctx.deps.config.planJsonMaxBytes, PLAN_JSON_LIMIT);
}

/**
 * The plan JSON, parsed and checked as a plan document: 400 where it is not JSON, 422 (with a pointer)
 * where it is no plan, is not UTF-8 (naming the byte) or holds a number jsonb cannot keep.
 */
function planDocument(bytes: Buffer): { reading: Extract<PlanReading, { ok: true }> } {
  const { value } = parseJsonBytes(bytes, PLAN_JSON);
  // PostgreSQL's jsonb holds neither NUL nor an unpaired surrogate, and deep nesting overflows serializers.
  if (someString(value, (item) => item.includes('\u0000') || !item.isWellFormed()))
    throw new ApiError(422, 'invalid plan', 'The plan must not contain NUL characters or unpaired surrogates.', { pointer: '' });
  if (nestsDeeperThan(value, MAX_PLAN_DEPTH))
    throw new ApiError(422, 'invalid plan', `The plan must not nest deeper than ${MAX_PLAN_DEPTH} levels.`, { pointer: '' });
  const reading = readPlan(value);
  if (!reading.ok) throw new ApiError(422, 'invalid plan', reading.detail, { pointer: reading.pointer });
  return { reading };
}

/** The plan error a plan JSON marked `errored: true` ends the run with (docs/pipelines.md, "An errored plan"). */
const ERRORED_PLAN_MESSAGE =
  'Terraform marked this plan as errored ("errored": true): it failed part way, its changes are incomplete and it cannot be applied. Fix the errors `terraform plan` printed and start a new run.';

function reportPlan(where: Where) {
  return async (ctx: ApiContext): Promise<void> => {
    const run = await reportedRun(ctx, 'runs:plan', where, 'plan');
    const planFileSha256 = planFileSha256Of(ctx.request.headers);
    const plan = await storePlan(ctx, run);
    const incoming: IncomingReport = { kind: 'plan', planJsonSha256: plan.sha256, planFileSha256 };
    let taken = false;
    try {
      // Parsed once, only where the report is taken: a repeat is recognised by its SHA-256 alone.
      taken = await take(ctx, run, incoming, async () => {
        const { reading } = planDocument(await readStored(ctx, plan.key));
        return {
          kind: 'plan',
          planObjectKey: plan.key,
          summary: reading.summary,
          planJsonSha256: plan.sha256,
          planFileSha256,
          erroredMessage: reading.errored ? ERRORED_PLAN_MESSAGE : null,
        };
      });
    } finally {
      // A repeat, a refusal or an invalid plan keeps nothing.
      if (!taken) await discardObjects(ctx, [plan.key]);
    }
  };
}

const errorSchema = z.object({ message: safeText(10_000).min(1, 'must not be empty') });
// As the run actions' bodies (HCP's take a comment): none, `{}`, or a comment, which is not kept.
// Not a union with z.undefined(): a union reports any failure at the document root, losing the pointer.
const finishSchema = z.object({ comment: safeText(10_000).nullable().optional() }).optional();

function reportPlanError(where: Where) {
  return async (ctx: ApiContext): Promise<void> => {
    const { message } = parseWith(errorSchema, ctx.request.body);
    const run = await reportedRun(ctx, 'runs:plan', where, 'plan-errored');
    await take(ctx, run, { kind: 'plan-errored', message }, () => ({ kind: 'plan-errored', message }));
  };
}

function reportApplyError(where: Where) {
  return async (ctx: ApiContext): Promise<void> => {
    const { message } = parseWith(errorSchema, ctx.request.body);
    const run = await reportedRun(ctx, 'runs:apply', where, 'apply-errored');
    const planFileSha256 = planFileSha256Of(ctx.request.headers);
    await take(ctx, run, { kind: 'apply-errored', message, planFileSha256 }, () => ({ kind: 'apply-errored', message }));
  };
}

function reportApply(where: Where) {
  return async (ctx: ApiContext): Promise<void> => {
    parseWith(finishSchema, ctx.request.body);
    const run = await reportedRun(ctx, 'runs:apply', where, 'apply');
    const planFileSha256 = planFileSha256Of(ctx.request.headers);
    await take(ctx, run, { kind: 'apply', planFileSha256 }, () => ({ kind: 'apply' }));
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
const REPEATS =
  "The same report again (the same plan JSON and plan file, or the same outcome and message) answers 200 with the document as it is now and Idempotent-Replayed: true; another plan, or another outcome (a failure after a success, or the reverse), is a 409 'conflicting report' whose detail and meta (taken, refused) name both. A run that never waited for the report, ended without it (canceled, discarded), or of a remote workspace: 409 'transition not allowed'. Nothing is changed by a refusal.";
const REPORT_RULES = `For runs of workspaces whose execution-mode is local, while the run is planning (a pipeline runs Terraform and reports here; HCP has no such endpoint). ${REPEATS}`;
const APPLY_RULES = `For runs of workspaces whose execution-mode is local, while the run is applying. ${REPEATS} Needs permission to apply on the workspace (403 naming it where the token may only read the run).`;

const PLAN_FILE_HEADER = {
  name: PLAN_FILE_SHA256_HEADER,
  description:
    'The SHA-256 (64 hex digits) of the binary plan file (terraform plan -out) this plan JSON was shown from. Kept with the plan (plan-file-sha256 on the plans document) and compared by a repeated report.',
};
const APPLIED_FILE_HEADER = {
  name: PLAN_FILE_SHA256_HEADER,
  description:
    "The SHA-256 of the plan file that was applied: a 409 'conflicting report' naming both where the plan was reported with another plan file.",
};

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
    headers: [PLAN_FILE_HEADER],
    notes: `${REPORT_RULES} Needs permission to plan on the workspace. A body that is not a plan document (no format_version, or a resource_changes that is not an array of changes with actions) is a 422 whose source.pointer names the member. Answers with the plans document: status finished, has-changes (Terraform's applyable where the plan has it, else the counts) and the resource counts from resource_changes, plan-json-sha256 and plan-file-sha256. A plan Terraform marked errored (errored: true) is taken and ends the run errored, its plan errored with a message that says so.`,
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
    handler: reportPlanError(where),
  })),
  ...both('/applies/:apply_id/actions/finish', '/runs/:run_id/apply/actions/finish', byApply, (where) => ({
    method: 'POST',
    auth: 'token',
    summary: "Report that a local run's apply finished",
    headers: [APPLIED_FILE_HEADER],
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
    headers: [APPLIED_FILE_HEADER],
    notes: `${APPLY_RULES} The run ends errored; the apply shows status errored and the message as error-message.`,
    requestSchema: errorSchema,
    response: documentResponse,
    handler: reportApplyError(where),
  })),
];
