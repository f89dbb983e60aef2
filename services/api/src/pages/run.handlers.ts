import { actorId } from '../auth/actor.ts';
import { notFound } from '@runtasks/shared/errors';
import { RUN_ACTIONS, type RunAction } from '@runtasks/shared/domain';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { actionSchema, overrideSchema } from '../routes/schemas.ts';
import { canOverrideTasks, findRun, findStage } from '../services/run-lookup.service.ts';
import { applyRunAction } from '../services/run.service.ts';
import { overrideTaskStage } from '../services/task-stage.service.ts';
import { pagePath } from './access.ts';
import { checkCsrf } from './csrf.ts';
import { pageError } from './errors.ts';
import { readForm } from './form.ts';
import { html } from './html.ts';
import { sendFragment, sendPage } from './layout.ts';
import { findPageRun, loadRunPage, runFingerprint } from './run.data.ts';
import { runLive } from './run.page.ts';
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
      ${runLive(ctx, session, data, ctx.deps.config.pagesRefreshMs)}`,
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
  checkCsrf(ctx, session.id, form.get('csrf'));
  parseWith(overrideSchema, { comment: commentOf(form) });
  const run = await findPageRun(ctx);
  // An id is letters, digits and dashes: anything else (a NUL, which PostgreSQL refuses in text) names no stage.
  const stageId = form.get('stage') ?? '';
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(stageId)) throw notFound();
  const stage = await findStage(ctx, stageId);
  if (stage.run.id !== run.id || !canOverrideTasks(ctx.state.principal, stage.run.organization.id)) throw notFound();
  await overrideTaskStage(ctx.state.em, stage);
  ctx.status = 303;
  ctx.redirect(runPagePath(ctx));
}

/** Applies, discards or cancels this run, by the API's rules (the runs permission to apply, else 404; 409 when its status does not allow it). */
export async function submitRunAction(ctx: ApiContext, session: PageSession): Promise<void> {
  const form = await readForm(ctx);
  checkCsrf(ctx, session.id, form.get('csrf'));
  const action = form.get('action') as RunAction | undefined;
  if (!action || !RUN_ACTIONS.includes(action)) throw pageError(422, `The action must be one of ${RUN_ACTIONS.join(', ')}.`);
  parseWith(actionSchema, { comment: commentOf(form) });
  await findPageRun(ctx);
  const run = await findRun(ctx, 'runs:apply', { id: ctx.params['run_id'] ?? '' });
  await applyRunAction(ctx.state.em, run, action, actorId(ctx.state.principal));
  ctx.status = 303;
  ctx.redirect(runPagePath(ctx));
}
