import { applyStatus, planStatus, type ExecutionSubject } from './executions.ts';
import type { RunStatus } from './statuses.ts';

/**
 * What to do with a pipeline's report of a local run's plan or apply, given what the run holds: take
 * it (the run waits for it), answer it again (the very same report was taken before: a retry after a
 * lost answer), or refuse it. A report is the same only when its content is: the same plan JSON (its
 * SHA-256) and plan file, or the same outcome with the same message. A different plan, or an outcome
 * other than the one taken (a failure after a success, a success after a failure), is a conflict that
 * names both, so the plan that was checked is the plan that is applied.
 */

/** The run as the rule needs it: its status and timestamps, and what its reports left. */
export interface ReportedRun extends ExecutionSubject {
  /** Why its plan or apply errored: the pipeline's message, Terraform's errored plan, or the timeout's. */
  executionError: string | null;
  /** SHA-256 (hex) of the plan JSON the pipeline reported; null before any was. */
  planJsonSha256: string | null;
  /** SHA-256 (hex) of the binary plan file, where the pipeline gave it with its plan. */
  planFileSha256: string | null;
}

export type IncomingReport =
  | { kind: 'plan'; planJsonSha256: string; planFileSha256: string | null }
  | { kind: 'plan-errored'; message: string }
  | { kind: 'apply'; planFileSha256: string | null }
  | { kind: 'apply-errored'; message: string; planFileSha256: string | null };

/**
 * One side of a conflict, as the 409's `meta` shows it. A plan JSON is named by its hashes (its outcome
 * follows from its content, which a report refused is not read for).
 */
export interface ReportOutcome {
  outcome?: 'finished' | 'errored';
  'plan-json-sha256'?: string | null;
  'plan-file-sha256'?: string | null;
  message?: string | null;
}

export type ReportDecision =
  | { kind: 'take' }
  | { kind: 'repeat' }
  | { kind: 'refuse'; title: 'transition not allowed'; detail: string }
  | { kind: 'refuse'; title: 'conflicting report'; detail: string; meta: { taken: ReportOutcome; refused: ReportOutcome } };

const isPlanReport = (report: IncomingReport): boolean => report.kind === 'plan' || report.kind === 'plan-errored';

/** The status a report of this kind is taken at. */
export const reportAwaitedStatus = (kind: IncomingReport['kind']): RunStatus =>
  kind === 'plan' || kind === 'plan-errored' ? 'planning' : 'applying';

function incomingOutcome(report: IncomingReport): ReportOutcome {
  switch (report.kind) {
    case 'plan':
      return { 'plan-json-sha256': report.planJsonSha256, 'plan-file-sha256': report.planFileSha256 };
    case 'plan-errored':
      return { outcome: 'errored', message: report.message };
    case 'apply':
      return { outcome: 'finished', ...(report.planFileSha256 !== null && { 'plan-file-sha256': report.planFileSha256 }) };
    case 'apply-errored':
      return {
        outcome: 'errored',
        message: report.message,
        ...(report.planFileSha256 !== null && { 'plan-file-sha256': report.planFileSha256 }),
      };
  }
}

/** What the run holds of the phase's report, once it ended. */
function takenOutcome(run: ReportedRun, plan: boolean, status: 'finished' | 'errored'): ReportOutcome {
  if (!plan) return { outcome: status, ...(status === 'errored' && { message: run.executionError }) };
  // A plan JSON that Terraform marked errored ended the plan errored, with its hashes kept.
  if (run.planJsonSha256 !== null)
    return {
      outcome: status,
      'plan-json-sha256': run.planJsonSha256,
      'plan-file-sha256': run.planFileSha256,
      ...(status === 'errored' && { message: run.executionError }),
    };
  return { outcome: status, message: run.executionError };
}

/**
 * Whether a report is the one taken: a plan JSON is its hash and its plan file's (its content stands for
 * its outcome, Terraform's error included), a reported failure its message, a finished apply just that
 * (its plan file was checked against the plan's before).
 */
function sameOutcome(plan: boolean, taken: ReportOutcome, refused: ReportOutcome): boolean {
  const json = taken['plan-json-sha256'] ?? null;
  if (plan && json !== null)
    return json === refused['plan-json-sha256'] && (taken['plan-file-sha256'] ?? null) === (refused['plan-file-sha256'] ?? null);
  if (taken.outcome !== refused.outcome || refused['plan-json-sha256'] !== undefined) return false;
  return taken.outcome === 'finished' || taken.message === refused.message;
}

function summarize(outcome: ReportOutcome): string {
  const parts: string[] = outcome.outcome ? [outcome.outcome] : [];
  if (outcome['plan-json-sha256']) parts.push(`plan JSON sha256 ${outcome['plan-json-sha256']}`);
  if (outcome['plan-file-sha256']) parts.push(`plan file sha256 ${outcome['plan-file-sha256']}`);
  if (outcome.message) parts.push(`message "${outcome.message}"`);
  return parts.join(', ');
}

const conflict = (what: string, taken: ReportOutcome, refused: ReportOutcome, advice: string): ReportDecision => ({
  kind: 'refuse',
  title: 'conflicting report',
  detail: `The ${what} was reported already (${summarize(taken)}); this report differs (${summarize(refused)}). ${advice}`,
  meta: { taken, refused },
});

/** A plan file applied that is not the one checked with the plan: refused, whatever the run's status. */
function planFileMismatch(run: ReportedRun, report: IncomingReport): ReportDecision | undefined {
  if (isPlanReport(report) || !('planFileSha256' in report) || report.planFileSha256 === null) return undefined;
  if (run.planFileSha256 === null || run.planFileSha256 === report.planFileSha256) return undefined;
  const taken: ReportOutcome = { outcome: 'finished', 'plan-json-sha256': run.planJsonSha256, 'plan-file-sha256': run.planFileSha256 };
  return {
    kind: 'refuse',
    title: 'conflicting report',
    detail: `The plan file applied (sha256 ${report.planFileSha256}) is not the plan file checked with this run's plan (sha256 ${run.planFileSha256}). Apply the plan file that was reported with the plan, or start a new run for this one.`,
    meta: { taken, refused: incomingOutcome(report) },
  };
}

export function decideReport(run: ReportedRun, report: IncomingReport): ReportDecision {
  const plan = isPlanReport(report);
  const what = plan ? 'plan' : 'apply';
  const awaited = reportAwaitedStatus(report.kind);
  const mismatch = planFileMismatch(run, report);
  if (mismatch) return mismatch;
  const status = plan ? planStatus(run) : applyStatus(run);
  switch (status) {
    case 'running':
      return { kind: 'take' };
    case 'pending':
    case 'unreachable':
      return {
        kind: 'refuse',
        title: 'transition not allowed',
        detail: `A run that is ${run.status} takes no ${what} report: only a run that is ${awaited} does.`,
      };
    case 'canceled':
      return {
        kind: 'refuse',
        title: 'transition not allowed',
        detail: `The run was ${run.status} while it waited for its ${what}; it takes no report. Start a new run.`,
      };
    case 'finished':
    case 'errored': {
      const taken = takenOutcome(run, plan, status);
      const refused = incomingOutcome(report);
      if (sameOutcome(plan, taken, refused)) return { kind: 'repeat' };
      const advice = plan
        ? 'A run checks one plan: start a new run for another plan.'
        : 'The apply of a run is reported once: check what Terraform did, and start a new run if needed.';
      return conflict(what, taken, refused, advice);
    }
  }
}
