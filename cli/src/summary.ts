import type { Command } from './args.ts';
import { FAILED_RESULT, type ResultView, type StageView, type Verdict } from './verdict.ts';

/**
 * The Markdown a pipeline shows as its job summary (GitHub's $GITHUB_STEP_SUMMARY, a GitLab artifact):
 * one table per stage with each task's enforcement, status, message, details link and outcome count.
 * Pure, so a golden file pins it.
 */
export interface SummaryInput {
  address: string;
  command: Command;
  runId: string;
  runStatus: string;
  stages: readonly StageView[];
  verdict: Verdict;
}

const MAX_MESSAGE = 300;

/** A table cell: one line, pipes escaped, long messages cut. */
export function cell(text: string | null | undefined): string {
  if (!text) return '—';
  const line = text.replace(/\s+/g, ' ').trim();
  const cut = line.length > MAX_MESSAGE ? `${line.slice(0, MAX_MESSAGE - 1)}…` : line;
  return cut.replace(/([\\|`*_[\]<>])/g, '\\$1');
}

function link(url: string | null): string {
  if (!url || !/^https?:\/\/[^\s)]+$/.test(url)) return '—';
  return `[details](${url})`;
}

function icon(result: ResultView): string {
  if (result.status === 'passed') return '✅';
  if (FAILED_RESULT.has(result.status)) return result.enforcement === 'mandatory' ? '❌' : '⚠️';
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

function verdictLine(verdict: Verdict): string {
  switch (verdict.kind) {
    case 'go':
      return '**Verdict: go on.**';
    case 'blocked':
      return `**Verdict: blocked** (${cell(verdict.reason)}).`;
    case 'stopped':
      return `**Verdict: stopped** (${cell(verdict.reason)}).`;
    case 'wait':
      return '**Verdict: still waiting.**';
  }
}

export function renderSummary(input: SummaryInput): string {
  const runUrl = `${input.address}/api/v2/runs/${input.runId}`;
  const lines = [
    `### Run tasks: \`runtasks run ${input.command}\``,
    '',
    `Run [${input.runId}](${runUrl}) is \`${input.runStatus}\`. ${verdictLine(input.verdict)}`,
    '',
  ];
  if (input.stages.length === 0) lines.push('No run tasks at this stage.', '');
  for (const stage of input.stages) {
    lines.push(
      `#### ${stage.stage} (${stage.status})`,
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
