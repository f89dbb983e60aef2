import type { Command } from './args.ts';
import { planLine, type PlanCounts } from './plan-counts.ts';
import { FAILED_RESULT, type ResultView, type StageView, type Verdict } from './verdict.ts';

/**
 * The Markdown a pipeline shows as its job summary (GitHub's $GITHUB_STEP_SUMMARY, a GitLab artifact):
 * the verdict with its reason, the plan's counts, then one table per stage with each task's enforcement,
 * status, message, details link and outcome count. Pure, so a golden file pins it.
 */
export interface SummaryInput {
  command: Command;
  runId: string;
  /** The run's page for people (`/app/…/runs/<id>`), never the API's URL. */
  page: string;
  runStatus: string;
  stages: readonly StageView[];
  verdict: Verdict;
  /** Why, in a sentence: the failed task's or the Terraform step's message. */
  because: string | null;
  plan: PlanCounts | null;
}

const MAX_MESSAGE = 300;

/** A table cell: one line, pipes escaped, long messages cut. */
export function cell(text: string | null | undefined): string {
  if (!text) return '—';
  const line = text.replace(/\s+/g, ' ').trim();
  const cut = line.length > MAX_MESSAGE ? `${line.slice(0, MAX_MESSAGE - 1)}…` : line;
  return cut.replace(/([\\|`*_[\]<>])/g, '\\$1');
}

/**
 * A Markdown link to an http(s) URL, whatever it holds: the characters that would end the link (`(`,
 * `)`, spaces, `<`, `>`) are percent-encoded, which leaves the address the same. Anything else is no link.
 */
export function link(url: string | null, label = 'details'): string {
  if (!url) return '—';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return '—';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return '—';
  const safe = parsed.href.replace(/[()<>\s|]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
  return `[${label}](${safe})`;
}

/** Failures at post_apply only warn (as in HCP): mandatory or not, they show as warnings. */
export const onlyWarns = (result: ResultView): boolean => result.enforcement !== 'mandatory' || result.stage === 'post_apply';

function icon(result: ResultView): string {
  if (result.status === 'passed') return '✅';
  if (FAILED_RESULT.has(result.status)) return onlyWarns(result) ? '⚠️' : '❌';
  if (result.status === 'canceled') return '⏹️';
  return '⏳';
}

function counts(stage: StageView): string {
  const byStatus = new Map<string, number>();
  for (const result of stage.results) byStatus.set(result.status, (byStatus.get(result.status) ?? 0) + 1);
  const parts = [...byStatus].map(([status, count]) => `${count} ${status}`);
  const outcomes = stage.results.reduce((sum, result) => sum + result.outcomes, 0);
  const tasks = `${stage.results.length} task${stage.results.length === 1 ? '' : 's'}`;
  return `${tasks}: ${parts.join(', ')} · ${outcomes} outcome${outcomes === 1 ? '' : 's'}`;
}

/** The stage's status as the service has it, with what it means where that is not obvious. */
function stageHeading(stage: StageView): string {
  const failed = stage.results.filter((result) => FAILED_RESULT.has(result.status));
  const warned = stage.status === 'passed' && failed.length > 0;
  const note = warned ? ` (${failed.length} failed task${failed.length === 1 ? '' : 's'} only warn${failed.length === 1 ? 's' : ''})` : '';
  return `#### ${stage.stage}: ${stage.status}${note}`;
}

function verdictLine(verdict: Verdict, because: string | null): string {
  const why = because ? ` ${cell(because)}` : '';
  switch (verdict.kind) {
    case 'go':
      return '**Verdict: go on.**';
    case 'blocked':
      return `**Verdict: blocked** (${cell(verdict.reason)}).${why}`;
    case 'stopped':
      return `**Verdict: stopped** (${cell(verdict.reason)}).${why}`;
    case 'wait':
      return '**Verdict: still waiting.**';
  }
}

export function renderSummary(input: SummaryInput): string {
  const lines = [
    `### Run tasks: \`runtasks run ${input.command}\``,
    '',
    `Run ${link(input.page, input.runId)} is \`${input.runStatus}\`. ${verdictLine(input.verdict, input.because)}`,
    '',
  ];
  const plan = planLine(input.plan);
  if (plan) lines.push(`${plan.charAt(0).toUpperCase()}${plan.slice(1)}.`, '');
  if (input.stages.length === 0) lines.push('No run tasks at this stage.', '');
  for (const stage of input.stages) {
    lines.push(
      stageHeading(stage),
      '',
      '| Task | Enforcement | Status | Message | Details | Outcomes |',
      '| :--- | :--- | :--- | :--- | :--- | ---: |',
    );
    for (const result of stage.results) {
      lines.push(
        `| ${cell(result.task)} | ${result.enforcement} | ${icon(result)} ${result.status} | ${cell(result.message)} | ${link(result.url)} | ${result.outcomes} |`,
      );
    }
    lines.push('', counts(stage), '');
  }
  return `${lines.join('\n').trimEnd()}\n`;
}
