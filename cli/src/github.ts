/**
 * GitHub Actions' workflow commands for the task results a step saw: `::error::` for a mandatory task
 * that blocked the run, `::warning::` for a failure that only warns (advisory, post_apply, or overridden).
 * They are written to stderr, which the runner reads as it reads stdout, so that `--output json` keeps
 * stdout for its document. Pure: the lines are returned.
 */
import { onlyWarns } from './summary.ts';
import { FAILED_RESULT, type StageView, type Verdict } from './verdict.ts';

/** A workflow command's message: `%`, CR and LF escaped as the runner expects. */
export const escapeData = (text: string): string => text.replaceAll('%', '%25').replaceAll('\r', '%0D').replaceAll('\n', '%0A');
/** A property value (`title=`): also `:` and `,`. */
export const escapeProperty = (text: string): string => escapeData(text).replaceAll(':', '%3A').replaceAll(',', '%2C');

export function annotations(stages: readonly StageView[], verdict: Verdict, page: string): string[] {
  const blocking = new Set(
    verdict.kind === 'blocked' || verdict.kind === 'wait' ? (verdict.blocker?.results.map((result) => result.id) ?? []) : [],
  );
  const lines: string[] = [];
  for (const stage of stages) {
    for (const result of stage.results) {
      if (!FAILED_RESULT.has(result.status)) continue;
      const level = blocking.has(result.id) && !onlyWarns(result) ? 'error' : 'warning';
      const title = `${result.stage} ${result.task} (${result.enforcement}): ${result.status}`;
      const message = [result.message?.trim() || `the task ${result.status}`, result.url, `run: ${page}`].filter(Boolean).join('\n');
      lines.push(`::${level} title=${escapeProperty(title)}::${escapeData(message)}`);
    }
  }
  return lines;
}
