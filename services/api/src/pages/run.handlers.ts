import { actedBy } from '../auth/actor.ts';
import { notFound } from '@runtasks/shared/errors';
import { RUN_ACTIONS, type RunAction } from '@runtasks/shared/domain';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { actionSchema, overrideSchema } from '../routes/schemas.ts';
import { canOverrideTasks, findRun, findStage } from '../services/run-lookup.service.ts';
import { applyRunAction } from '../services/run.service.ts';
import { overrideTaskStage } from '../services/task-stage.service.ts';
import { pagePath } from './access.ts';
import { checkForm } from './browser-rules.ts';
import { pageError } from './errors.ts';
import { readForm } from './form.ts';
import { html, type SafeHtml } from './html.ts';
import { sendFragment, sendPage, SIGN_IN_PATH } from './layout.ts';
import { findPageRun, loadOutcome, loadRunPage, runFingerprint } from './run.data.ts';
import { outcomePage, runLive } from './run.page.ts';
import type { PageSession } from './session.ts';

/** /app/:org/workspaces/:ws/runs/:run: the run, its stages, results and outcomes, updated while it moves. */
export async function showRun(ctx: ApiContext, session: PageSession): Promise<void> {
  const data = await loadRunPage(ctx, await findPageRun(ctx));
  const organization = data.organizationName;
  sendPage(ctx, {
    title: `Run ${data.run.id}`,
    session,
    crumbs: [
      { label: organization, href: pagePath(organization) },
      { label: data.workspaceName, href: pagePath(organization, 'workspaces', data.workspaceName) },
      { label: data.run.id },
    ],
    body: html`<h1>Run <code>${data.run.id}</code></h1>
      <p id="live-status" class="visually-hidden" aria-live="polite"></p>
      ${liveNotice(data.path)} ${runLive(ctx, session, data, ctx.deps.config.pagesRefreshMs)}`,
  });
}

/**
 * Where the page's script says that live updates paused (a comment being written) or stopped (signed
 * out, the service out of reach), with the one click that resumes them. Hidden until then; outside the
 * live part, so an update never replaces it.
 */
const liveNotice = (path: string): SafeHtml =>
  html`<div id="live-notice" class="notice live-notice" role="status" hidden>
    <span class="live-notice-text"></span>
    <button type="button" class="live-notice-action" hidden>Update now</button>
    <a class="live-notice-sign-in" href="${SIGN_IN_PATH}?next=${path}" hidden>Sign in again</a>
  </div>`;

/** /app/…/runs/:run/outcomes/:outcome: one outcome in full, where the run page left its body out. */
export async function showOutcome(ctx: ApiContext, session: PageSession): Promise<void> {
  const run = await findPageRun(ctx);
  const outcome = await loadOutcome(ctx, run, ctx.params['outcome_id'] ?? '');
  const organization = ctx.params['organization_name'] ?? '';
  const path = runPagePath(ctx);
  sendPage(ctx, {
    title: `Outcome ${outcome.outcomeId}`,
    session,
    crumbs: [
      { label: organization, href: pagePath(organization) },
      { label: run.workspace.name, href: pagePath(organization, 'workspaces', run.workspace.name) },
      { label: run.id, href: path },
      { label: outcome.outcomeId },
    ],
    body: outcomePage({ path, now: new Date() }, outcome),
  });
}

/** The run page's live part; 304 while nothing it shows has changed (the page sends the last ETag). */
export async function showRunLive(ctx: ApiContext, session: PageSession): Promise<void> {
  const run = await findPageRun(ctx);
  const etag = await runFingerprint(ctx, run);
  ctx.set('ETag', etag);
  if (ctx.get('if-none-match') === etag) {
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 304;
    return;
  }
  sendFragment(ctx, runLive(ctx, session, await loadRunPage(ctx, run), ctx.deps.config.pagesRefreshMs));
}

const commentOf = (form: Map<string, string>): string | null => {
  const comment = form.get('comment')?.trim() ?? '';
  return comment === '' ? null : comment;
};

/** The run page's path for the URL this form was posted to (its own URL less the action). */
const runPagePath = (ctx: ApiContext): string =>
  pagePath(ctx.params['organization_name'] ?? '', 'workspaces', ctx.params['workspace_name'] ?? '', 'runs', ctx.params['run_id'] ?? '');

/** Overrides a stage of this run, by the API's rules: the stage must be readable, and the principal may override (else 404), awaiting override (else 409). */
export async function submitOverride(ctx: ApiContext, session: PageSession): Promise<void> {
  const form = await readForm(ctx);
  checkForm(ctx, session.id, form.get('csrf'));
  const comment = parseWith(overrideSchema, { comment: commentOf(form) })?.comment;
  const run = await findPageRun(ctx);
  // An id is letters, digits and dashes: anything else (a NUL, which PostgreSQL refuses in text) names no stage.
  const stageId = form.get('stage') ?? '';
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(stageId)) throw notFound();
  const stage = await findStage(ctx, stageId);
  if (stage.run.id !== run.id || !canOverrideTasks(ctx.state.principal, stage.run.organization.id)) throw notFound();
  await overrideTaskStage(ctx.state.em, stage, actedBy(ctx.state.principal, comment));
  ctx.status = 303;
  ctx.redirect(runPagePath(ctx));
}

/** Applies, discards or cancels this run, by the API's rules (the runs permission to apply, else 404; 409 when its status does not allow it). */
export async function submitRunAction(ctx: ApiContext, session: PageSession): Promise<void> {
  const form = await readForm(ctx);
  checkForm(ctx, session.id, form.get('csrf'));
  const action = form.get('action') as RunAction | undefined;
  if (!action || !RUN_ACTIONS.includes(action)) throw pageError(422, `The action must be one of ${RUN_ACTIONS.join(', ')}.`);
  const comment = parseWith(actionSchema, { comment: commentOf(form) })?.comment;
  await findPageRun(ctx);
  const run = await findRun(ctx, 'runs:apply', { id: ctx.params['run_id'] ?? '' });
  await applyRunAction(ctx.state.em, run, action, actedBy(ctx.state.principal, comment));
  ctx.status = 303;
  ctx.redirect(runPagePath(ctx));
}
