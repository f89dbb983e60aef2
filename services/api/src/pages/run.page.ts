import { FINAL_RUN_STATUSES, RUN_ACTIONS, RUN_STATUSES, runActionTarget, type RunAction } from '@runtasks/shared/domain';
import { type DeliveryAttempt, type TaskResult, type TaskStage } from '@runtasks/shared/db';
import type { ApiContext } from '../context.ts';
import { dataTable, outboundLink, statusBadge, tagBadge, time, words } from './components.ts';
import { csrfTokenFor } from './csrf.ts';
import { html, type SafeHtml } from './html.ts';
import { renderMarkdown } from './markdown.ts';
import type { OutcomeView, RunPageData } from './run.data.ts';
import type { PageSession } from './session.ts';

const ACTION_LABELS: Record<RunAction, string> = { apply: 'Confirm and apply', discard: 'Discard run', cancel: 'Cancel run' };

/** Outcome tags as stored: `{ "Severity": [{ "label": "High", "level": "error" }] }`; anything else is skipped. */
function tagsOf(tags: unknown): SafeHtml[] {
  if (!tags || typeof tags !== 'object') return [];
  return Object.entries(tags).flatMap(([name, values]) =>
    Array.isArray(values)
      ? values.flatMap((value: unknown) => {
          const { label, level } = (value ?? {}) as { label?: unknown; level?: unknown };
          return typeof label === 'string' ? [tagBadge(name, label, typeof level === 'string' ? level : undefined)] : [];
        })
      : [],
  );
}

/** The row under an outcome with its Markdown body, folded away; or a note where the page's budget left it out. */
function outcomeBody(outcome: OutcomeView): SafeHtml | undefined {
  if (outcome.bodyOmitted)
    return html`<tr class="outcome-body">
      <td colspan="3" class="hint">The details of ${outcome.outcomeId} are too long to show on this page: read them through the API.</td>
    </tr>`;
  if (!outcome.body) return undefined;
  return html`<tr class="outcome-body">
    <td colspan="3">
      <details id="outcome-${outcome.id}">
        <summary>Details of ${outcome.outcomeId}</summary>
        <div class="markdown">${renderMarkdown(outcome.body)}</div>
      </details>
    </td>
  </tr>`;
}

function outcomesTable(result: TaskResult, outcomes: readonly OutcomeView[]): SafeHtml | undefined {
  if (outcomes.length === 0) return undefined;
  const rows = outcomes.map(
    (outcome) =>
      html`<tr>
          <th scope="row">${outcome.outcomeId}</th>
          <td>${outcome.description ?? ''} ${outboundLink(outcome.url, 'More', `More about ${outcome.outcomeId}`)}</td>
          <td class="tags">${tagsOf(outcome.tags)}</td>
        </tr>
        ${outcomeBody(outcome)}`,
  );
  const more = result.outcomesCount - outcomes.length;
  const table = dataTable({ headers: ['Outcome', 'Description', 'Tags'], rows, caption: 'Outcomes', className: 'outcomes' });
  return html`${table} ${more > 0 ? html`<p class="hint">${more} more outcomes are readable through the API.</p>` : undefined}`;
}

function attemptsList(result: TaskResult, attempts: readonly DeliveryAttempt[]): SafeHtml {
  const rows = attempts.map(
    (attempt) =>
      html`<tr>
        <td>${attempt.attempt}</td>
        <td>${time(attempt.startedAt)}</td>
        <td>${attempt.durationMs} ms</td>
        <td>${attempt.httpStatus ?? attempt.errorKind ?? ''}</td>
        <td><code class="excerpt">${attempt.responseExcerpt ?? ''}</code></td>
      </tr>`,
  );
  return html`<details id="attempts-${result.id}" class="attempts">
    <summary>Delivery attempts (${attempts.length})</summary>
    ${attempts.length > 0 ? dataTable({ headers: ['#', 'Started', 'Took', 'Answer', "Answer's start"], rows }) : html`<p>None yet.</p>`}
  </details>`;
}

function resultCard(data: RunPageData, result: TaskResult): SafeHtml {
  return html`<article class="result" aria-labelledby="result-${result.id}">
    <h4 id="result-${result.id}">${result.taskName} ${statusBadge(result.status)}</h4>
    <dl class="facts">
      <dt>Enforcement</dt>
      <dd>${result.enforcementLevel}</dd>
      <dt>Message</dt>
      <dd class="message">${result.message ?? '—'}</dd>
      ${
        result.url
          ? html`<dt>Details</dt>
              <dd>${outboundLink(result.url, "The task's details") ?? 'not an http(s) link'}</dd>`
          : undefined
      }
    </dl>
    ${outcomesTable(result, data.outcomesByResult.get(result.id) ?? [])} ${attemptsList(result, data.attemptsByResult.get(result.id) ?? [])}
  </article>`;
}

function overrideForm(ctx: ApiContext, session: PageSession, data: RunPageData, stage: TaskStage): SafeHtml | undefined {
  if (stage.status !== 'awaiting_override' || !data.may.override) return undefined;
  return html`<form method="post" action="${data.path}/override" class="action">
    <input type="hidden" name="csrf" value="${csrfTokenFor(ctx, session.id)}" />
    <input type="hidden" name="stage" value="${stage.id}" />
    <label for="override-comment-${stage.id}">Comment (optional)</label>
    <textarea id="override-comment-${stage.id}" name="comment" rows="2" maxlength="10000"></textarea>
    <button type="submit">Override and continue</button>
  </form>`;
}

function stageSection(ctx: ApiContext, session: PageSession, data: RunPageData, stage: TaskStage): SafeHtml {
  const results = data.resultsByStage.get(stage.id) ?? [];
  return html`<section class="stage" aria-labelledby="stage-${stage.id}">
    <h3 id="stage-${stage.id}">${words(stage.stage)} ${statusBadge(stage.status)}</h3>
    ${overrideForm(ctx, session, data, stage)} ${results.map((result) => resultCard(data, result))}
  </section>`;
}

function runActions(ctx: ApiContext, session: PageSession, data: RunPageData): SafeHtml | undefined {
  if (!data.may.runActions) return undefined;
  const allowed = RUN_ACTIONS.filter((action) => runActionTarget(action, data.run) !== null);
  if (allowed.length === 0) return undefined;
  return html`<form method="post" action="${data.path}/actions" class="action">
    <input type="hidden" name="csrf" value="${csrfTokenFor(ctx, session.id)}" />
    <label for="action-comment">Comment (optional)</label>
    <textarea id="action-comment" name="comment" rows="2" maxlength="10000"></textarea>
    <div class="buttons">
      ${allowed.map((action) => html`<button type="submit" name="action" value="${action}" class="${action === 'apply' ? 'primary' : 'secondary'}">${ACTION_LABELS[action]}</button>`)}
    </div>
  </form>`;
}

const lifecycleIndex = (status: string): number => (RUN_STATUSES as readonly string[]).indexOf(status);

function timeline(data: RunPageData): SafeHtml {
  const entries = Object.entries(data.run.statusTimestamps)
    .map(([key, at]) => ({ status: key.replace(/-at$/, '').replaceAll('-', '_'), at }))
    // Timestamps have a resolution of their own: steps taken in the same instant keep lifecycle order.
    .sort((a, b) => a.at.localeCompare(b.at) || lifecycleIndex(a.status) - lifecycleIndex(b.status));
  return html`<ol class="timeline">
    ${entries.map((entry) => html`<li>${statusBadge(entry.status)} ${time(entry.at)}</li>`)}
  </ol>`;
}

/** The part of the run page that follows the run: replaced in place by the page's script while the run moves. */
export function runLive(ctx: ApiContext, session: PageSession, data: RunPageData, refreshMs: number): SafeHtml {
  const run = data.run;
  const final = FINAL_RUN_STATUSES.has(run.status);
  return html`<div
    id="run-live"
    data-live-url="${data.path}/live"
    data-final="${final ? 'true' : 'false'}"
    data-interval="${refreshMs}"
    data-status="${words(run.status)}"
  >
    <section class="card" aria-labelledby="summary-heading">
      <h2 id="summary-heading">Status</h2>
      <p class="status-line">
        ${statusBadge(run.status)} ${run.hasTaskWarnings ? html`<span class="badge tone-warn">task warnings</span>` : undefined}
      </p>
      <dl class="facts">
        <dt>Message</dt>
        <dd>${run.message || '—'}</dd>
        <dt>Created</dt>
        <dd>${time(run.createdAt)}</dd>
        <dt>Kind</dt>
        <dd>${run.planOnly ? 'plan only' : 'plan and apply'}${run.isDestroy ? ', destroy' : ''}${run.autoApply ? ', auto-apply' : ''}</dd>
      </dl>
      ${runActions(ctx, session, data)}
    </section>
    <section aria-labelledby="stages-heading">
      <h2 id="stages-heading">Task stages</h2>
      ${data.stages.length > 0 ? data.stages.map((stage) => stageSection(ctx, session, data, stage)) : html`<p>This run has no task stages: no run tasks applied to it when it was created.</p>`}
    </section>
    <section aria-labelledby="timeline-heading">
      <h2 id="timeline-heading">Timeline</h2>
      ${timeline(data)}
    </section>
  </div>`;
}
