import {
  FINAL_RUN_STATUSES,
  RUN_ACTIONS,
  RUN_STATUSES,
  runActionSubject,
  runActionTarget,
  statusTimestampKey,
  TAG_LEVELS,
  type RunAction,
  type RunEventAction,
  type RunStatus,
} from '@runtasks/shared/domain';
import { type DeliveryAttempt, type TaskResult, type TaskStage } from '@runtasks/shared/db';
import type { ApiContext } from '../context.ts';
import { csrfToken } from './browser-rules.ts';
import { dataTable, duration, outboundLink, statusBadge, tagBadge, time, untrusted, words } from './components.ts';
import { html, type SafeHtml } from './html.ts';
import { renderMarkdown } from './markdown.ts';
import { MARKDOWN_BUDGET, MAX_OUTCOMES, type OutcomeView, type RunEventView, type RunPageData, type SeverityCounts } from './run.data.ts';
import type { PageSession } from './session.ts';
import { resultWords, runStatusWords, runWords, stageWords } from './status-words.ts';

const ACTION_LABELS: Record<RunAction, string> = { apply: 'Confirm and apply', discard: 'Discard run', cancel: 'Cancel run' };

/** How each recorded action reads on the page ("Confirmed by team platform of acme"). */
const EVENT_WORDS: Record<RunEventAction, string> = {
  created: 'Created',
  commented: 'Commented',
  confirmed: 'Confirmed',
  discarded: 'Discarded',
  canceled: 'Canceled',
  force_canceled: 'Force-canceled',
  force_executed: 'Force-executed',
  overridden: 'Overridden',
  plan_reported: 'Plan reported',
  plan_errored: 'Plan failure reported',
  apply_reported: 'Apply reported',
  apply_errored: 'Apply failure reported',
};

/** The actions whose who-and-when the status card shows (the rest are in the activity list). */
const DECISIONS: ReadonlySet<RunEventAction> = new Set(['confirmed', 'discarded', 'canceled', 'force_canceled', 'force_executed']);

/**
 * Statuses the service leaves by itself at once (nothing waits for a person or a task server there):
 * while the run is in one, the page asks again soon, so the step after an action shows at once.
 */
const SETTLING: ReadonlySet<RunStatus> = new Set([
  'confirmed',
  'pre_plan_completed',
  'pre_apply_completed',
  'planned',
  'post_plan_completed',
]);

const plural = (count: number, one: string, many = `${one}s`): string => `${count} ${count === 1 ? one : many}`;

/** "Pre-plan" → the stage as a heading says it. */
const stageName = (stage: string): string => words(stage);

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

const SEVERITY_WORDS: Record<(typeof TAG_LEVELS)[number], (count: number) => string> = {
  error: (count) => plural(count, 'error'),
  warning: (count) => plural(count, 'warning'),
  info: (count) => `${count} info`,
  none: (count) => `${count} without a level`,
};

/** Outcome counts by severity, most severe first, as badges; nothing where there are no outcomes. */
function severityBadges(counts: SeverityCounts | undefined): SafeHtml | undefined {
  if (!counts) return undefined;
  const levels = [...TAG_LEVELS].reverse().filter((level) => counts[level] > 0);
  if (levels.length === 0) return undefined;
  return html`<ul class="severity" aria-label="Outcomes by severity">
    ${levels.map((level) => html`<li class="badge level-${level}">${SEVERITY_WORDS[level](counts[level])}</li>`)}
  </ul>`;
}

function sumCounts(all: readonly (SeverityCounts | undefined)[]): SeverityCounts | undefined {
  const present = all.filter((counts): counts is SeverityCounts => counts !== undefined);
  if (present.length === 0) return undefined;
  const total: SeverityCounts = { none: 0, info: 0, warning: 0, error: 0 };
  for (const counts of present) for (const level of TAG_LEVELS) total[level] += counts[level];
  return total;
}

/** The row under an outcome with its Markdown body, folded away; or why this page left it out, with a link to it. */
function outcomeBody(data: RunPageData, outcome: OutcomeView): SafeHtml | undefined {
  if (outcome.bodyOmitted)
    return html`<tr class="outcome-body">
      <td colspan="3" class="hint">
        Details left out here: this page already shows ${MARKDOWN_BUDGET / (1024 * 1024)} MiB of outcome details.
        <a href="${data.path}/outcomes/${outcome.id}">Read the details of ${untrusted(outcome.outcomeId)}</a>
      </td>
    </tr>`;
  if (!outcome.body) return undefined;
  return html`<tr class="outcome-body">
    <td colspan="3">
      <details id="outcome-${outcome.id}">
        <summary>Details of ${untrusted(outcome.outcomeId)}</summary>
        <div class="markdown">${renderMarkdown(outcome.body)}</div>
      </details>
    </td>
  </tr>`;
}

function outcomesTable(data: RunPageData, result: TaskResult, outcomes: readonly OutcomeView[]): SafeHtml | undefined {
  if (outcomes.length === 0) return undefined;
  const rows = outcomes.map(
    (outcome) =>
      html`<tr>
          <th scope="row">${untrusted(outcome.outcomeId)}</th>
          <td>${untrusted(outcome.description ?? '')} ${outboundLink(outcome.url, 'More', `More about ${outcome.outcomeId}`)}</td>
          <td class="tags">${tagsOf(outcome.tags)}</td>
        </tr>
        ${outcomeBody(data, outcome)}`,
  );
  const more = result.outcomesCount - outcomes.length;
  const table = dataTable({ headers: ['Outcome', 'Description', 'Tags'], rows, caption: 'Outcomes', className: 'outcomes' });
  return html`${table}
  ${
    more > 0
      ? html`<p class="hint">
          ${plural(more, 'more outcome')} of this task are not listed: a run page lists ${MAX_OUTCOMES.toLocaleString('en')} at most. The
          API lists them all (<code>GET /api/v2/task-results/${result.id}/outcomes</code>).
        </p>`
      : undefined
  }`;
}

function attemptsList(result: TaskResult, attempts: readonly DeliveryAttempt[], now: Date): SafeHtml {
  const rows = attempts.map(
    (attempt) =>
      html`<tr>
        <td>${attempt.attempt}</td>
        <td>${time(attempt.startedAt, now)}</td>
        <td>${duration(attempt.durationMs)}</td>
        <td>${attempt.httpStatus ?? attempt.errorKind ?? ''}</td>
        <td><code class="excerpt">${attempt.responseExcerpt ?? ''}</code></td>
      </tr>`,
  );
  return html`<details id="attempts-${result.id}" class="attempts">
    <summary>Delivery attempts (${attempts.length})</summary>
    ${attempts.length > 0 ? dataTable({ headers: ['#', 'Started', 'Took', 'Answer', "Answer's start"], rows }) : html`<p>None yet.</p>`}
  </details>`;
}

/** How long something with `<status>-at` timestamps ran: from running-at to its final status, or until now. */
function tookFor(statusTimestamps: Record<string, string>, status: string, now: Date, final: boolean): string | undefined {
  const started = statusTimestamps['running-at'];
  if (!started) return undefined;
  const ended = final ? statusTimestamps[statusTimestampKey(status)] : undefined;
  const milliseconds = (ended ? Date.parse(ended) : now.getTime()) - Date.parse(started);
  if (Number.isNaN(milliseconds)) return undefined;
  return final ? `took ${duration(milliseconds)}` : `running for ${duration(milliseconds)}`;
}

const OPEN = new Set(['pending', 'running']);

function resultCard(data: RunPageData, result: TaskResult): SafeHtml {
  const took = tookFor(result.statusTimestamps, result.status, data.now, !OPEN.has(result.status));
  return html`<article class="result" aria-labelledby="result-${result.id}">
    <h4 id="result-${result.id}">${untrusted(result.taskName)} ${statusBadge(resultWords(result.status, result.enforcementLevel))}</h4>
    <dl class="facts">
      <dt>Enforcement</dt>
      <dd>${result.enforcementLevel}</dd>
      <dt>Message</dt>
      <dd class="message">${result.message ? untrusted(result.message) : '—'}</dd>
      ${
        took
          ? html`<dt>Time</dt>
              <dd>${took}</dd>`
          : undefined
      }
      ${
        result.url
          ? html`<dt>Details</dt>
              <dd>${outboundLink(result.url, "The task's details") ?? 'not an http(s) link'}</dd>`
          : undefined
      }
      ${
        result.outcomesCount > 0
          ? html`<dt>Outcomes</dt>
              <dd>${severityBadges(data.severityByResult.get(result.id))}</dd>`
          : undefined
      }
    </dl>
    ${outcomesTable(data, result, data.outcomesByResult.get(result.id) ?? [])}
    ${attemptsList(result, data.attemptsByResult.get(result.id) ?? [], data.now)}
  </article>`;
}

/** "2 passed, 1 failed (advisory)": a stage's results by outcome, failures by their enforcement. */
export function stageSummary(results: readonly Pick<TaskResult, 'status' | 'enforcementLevel'>[]): string {
  const order = ['passed', 'failed (mandatory)', 'failed (advisory)', 'errored', 'unreachable', 'running', 'pending', 'canceled'];
  const counts = new Map<string, number>();
  for (const result of results) {
    const key = result.status === 'failed' ? `failed (${result.enforcementLevel})` : result.status;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const parts = order.filter((key) => counts.has(key)).map((key) => `${counts.get(key)} ${key}`);
  return parts.length > 0 ? parts.join(', ') : 'no tasks';
}

/** Who did it, when, and what they said: "by owners of acme, 3 minutes ago: “Accepted”". */
function byline(event: RunEventView, now: Date): SafeHtml {
  return html`by <strong class="actor">${untrusted(event.actor)}</strong>,
    ${time(event.at, now)}${event.comment ? html`: <q class="comment">${untrusted(event.comment)}</q>` : undefined}`;
}

function overrideNote(data: RunPageData, override: RunEventView | undefined): SafeHtml | undefined {
  if (!override) return undefined;
  return html`<p class="override-note"><span class="badge tone-warn">Overridden</span> ${byline(override, data.now)}</p>`;
}

function overrideForm(ctx: ApiContext, session: PageSession, data: RunPageData, stage: TaskStage): SafeHtml | undefined {
  if (stage.status !== 'awaiting_override' || !data.may.override) return undefined;
  return html`<form method="post" action="${data.path}/override" class="action">
    <input type="hidden" name="csrf" value="${csrfToken(ctx, session.id)}" />
    <input type="hidden" name="stage" value="${stage.id}" />
    <label for="override-comment-${stage.id}">Why override? (optional comment)</label>
    <textarea id="override-comment-${stage.id}" name="comment" rows="2" maxlength="10000"></textarea>
    <button type="submit" id="override-${stage.id}">Override and continue</button>
  </form>`;
}

function stageSection(ctx: ApiContext, session: PageSession, data: RunPageData, stage: TaskStage): SafeHtml {
  const results = data.resultsByStage.get(stage.id) ?? [];
  const override = data.events.filter((event) => event.action === 'overridden' && event.taskStageId === stage.id).at(-1);
  const open = stage.status === 'pending' || stage.status === 'running' || stage.status === 'awaiting_override';
  const took = stage.status === 'awaiting_override' ? undefined : tookFor(stage.statusTimestamps, stage.status, data.now, !open);
  const started = stage.statusTimestamps['running-at'];
  return html`<section class="stage" aria-labelledby="stage-${stage.id}">
    <h3 id="stage-${stage.id}">${stageName(stage.stage)} ${statusBadge(stageWords(stage.status, override !== undefined))}</h3>
    <p class="stage-summary">
      <span class="summary">${stageSummary(results)}</span>${took ? html` · <span>${took}</span>` : undefined}${
        started ? html` · started ${time(started, data.now)}` : undefined
      }
    </p>
    ${severityBadges(sumCounts(results.map((result) => data.severityByResult.get(result.id))))} ${overrideNote(data, override)}
    ${overrideForm(ctx, session, data, stage)} ${results.map((result) => resultCard(data, result))}
  </section>`;
}

function runActions(ctx: ApiContext, session: PageSession, data: RunPageData): SafeHtml | undefined {
  if (!data.may.runActions) return undefined;
  const allowed = RUN_ACTIONS.filter((action) => runActionTarget(action, runActionSubject(data.run)) !== null);
  if (allowed.length === 0) return undefined;
  return html`<form method="post" action="${data.path}/actions" class="action">
    <input type="hidden" name="csrf" value="${csrfToken(ctx, session.id)}" />
    <label for="action-comment">Comment (optional)</label>
    <textarea id="action-comment" name="comment" rows="2" maxlength="10000"></textarea>
    <div class="buttons">
      ${allowed.map(
        (action) =>
          html`<button
            type="submit"
            id="action-${action}"
            name="action"
            value="${action}"
            class="${action === 'apply' ? 'primary' : 'secondary'}"
          >
            ${ACTION_LABELS[action]}
          </button>`,
      )}
    </div>
  </form>`;
}

/** The decisions people took on the run (confirm, discard, cancel, …): who, when, and their comment. */
function decisions(data: RunPageData): SafeHtml[] {
  return data.events
    .filter((event) => DECISIONS.has(event.action))
    .map(
      (event) =>
        html`<dt>${EVENT_WORDS[event.action]}</dt>
          <dd class="decision">${byline(event, data.now)}</dd>`,
    );
}

const lifecycleIndex = (status: string): number => (RUN_STATUSES as readonly string[]).indexOf(status);

/** The run's history: each status it reached and each thing people did to it, in order. */
function activity(data: RunPageData): SafeHtml {
  const statuses = Object.entries(data.run.statusTimestamps).map(([key, at]) => {
    const status = key.replace(/-at$/, '').replaceAll('-', '_');
    return { at: Date.parse(at), order: lifecycleIndex(status), item: html`${statusBadge(runStatusWords(status))} ${time(at, data.now)}` };
  });
  const events = data.events
    .filter((event) => event.action !== 'created')
    // An override's description names its stage, which the page shows beside the stage itself.
    .map((event) => ({
      at: event.at.getTime(),
      order: RUN_STATUSES.length,
      item: html`<span class="event">${EVENT_WORDS[event.action]}</span>${
          event.description && event.action !== 'overridden'
            ? html` <span class="hint">(${untrusted(event.description)})</span>`
            : undefined
        }
        ${byline(event, data.now)}`,
    }));
  // Timestamps have a resolution of their own: steps taken in the same instant keep lifecycle order.
  const entries = [...statuses, ...events].sort((a, b) => a.at - b.at || a.order - b.order);
  return html`<ol class="timeline">
    ${entries.map((entry) => html`<li>${entry.item}</li>`)}
  </ol>`;
}

/** The part of the run page that follows the run: replaced in place by the page's script while the run moves. */
export function runLive(ctx: ApiContext, session: PageSession, data: RunPageData, refreshMs: number): SafeHtml {
  const run = data.run;
  const final = FINAL_RUN_STATUSES.has(run.status);
  const now = runWords(run);
  const created = data.events.find((event) => event.action === 'created');
  return html`<div
    id="run-live"
    data-live-url="${data.path}/live"
    data-final="${final ? 'true' : 'false'}"
    data-settling="${SETTLING.has(run.status) ? 'true' : 'false'}"
    data-interval="${refreshMs}"
    data-etag="${data.fingerprint}"
    data-status="${now.label}"
  >
    <section class="card" aria-labelledby="summary-heading">
      <h2 id="summary-heading">Status</h2>
      <p class="status-line">
        ${statusBadge(now)} ${run.hasTaskWarnings ? html`<span class="badge tone-warn">Task warnings</span>` : undefined}
      </p>
      <dl class="facts">
        <dt>Message</dt>
        <dd class="message">${run.message ? untrusted(run.message) : '—'}</dd>
        <dt>Created</dt>
        <dd>${created ? byline(created, data.now) : time(run.createdAt, data.now)}</dd>
        <dt>Kind</dt>
        <dd>${run.planOnly ? 'plan only' : 'plan and apply'}${run.isDestroy ? ', destroy' : ''}${run.autoApply ? ', auto-apply' : ''}</dd>
        ${decisions(data)}
      </dl>
      ${runActions(ctx, session, data)}
    </section>
    <section aria-labelledby="stages-heading">
      <h2 id="stages-heading">Task stages</h2>
      ${
        data.stages.length > 0
          ? data.stages.map((stage) => stageSection(ctx, session, data, stage))
          : html`<p>This run has no task stages: no run tasks applied to it when it was created.</p>`
      }
    </section>
    <section aria-labelledby="timeline-heading">
      <h2 id="timeline-heading">Activity</h2>
      ${activity(data)}
    </section>
  </div>`;
}

/** One outcome in full, its body rendered (the run page links here where its budget left a body out). */
export function outcomePage(data: { path: string; now: Date }, outcome: OutcomeView & { taskName: string }): SafeHtml {
  return html`<h1>Outcome <bdi>${outcome.outcomeId}</bdi></h1>
    <p><a href="${data.path}">Back to the run</a></p>
    <dl class="facts">
      <dt>Task</dt>
      <dd>${untrusted(outcome.taskName)}</dd>
      <dt>Description</dt>
      <dd>${outcome.description ? untrusted(outcome.description) : '—'}</dd>
      ${
        outcome.url
          ? html`<dt>Link</dt>
              <dd>${outboundLink(outcome.url, outcome.url) ?? 'not an http(s) link'}</dd>`
          : undefined
      }
      <dt>Tags</dt>
      <dd class="tags">${tagsOf(outcome.tags)}</dd>
    </dl>
    <section aria-labelledby="details-heading">
      <h2 id="details-heading">Details</h2>
      ${outcome.body ? html`<div class="markdown">${renderMarkdown(outcome.body)}</div>` : html`<p>This outcome has no details.</p>`}
    </section>`;
}
