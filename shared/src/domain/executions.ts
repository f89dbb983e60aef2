import { FINAL_RUN_STATUSES, type ExecutionMode, type ExecutionStatus, type RunStatus } from './statuses.ts';

/**
 * A run's plan and apply as HCP shows them (`plans`, `applies`): their statuses and timestamps follow
 * from the run's own, so nothing is stored twice. A plan runs while its run is `planning` and is
 * finished once the run was `planned`; an apply likewise with `applying` and `applied`.
 */
export interface ExecutionSubject {
  status: RunStatus;
  statusTimestamps: Record<string, string>;
}

interface Phase {
  /** The run status while it runs. */
  running: RunStatus;
  /** The run status it leads to when it succeeds. */
  done: RunStatus;
}

const PLAN: Phase = { running: 'planning', done: 'planned' };
const APPLY: Phase = { running: 'applying', done: 'applied' };

function statusOf(run: ExecutionSubject, phase: Phase): ExecutionStatus {
  if (`${phase.done}-at` in run.statusTimestamps) return 'finished';
  if (run.status === phase.running) return 'running';
  if (!FINAL_RUN_STATUSES.has(run.status)) return 'pending';
  // Ended without it: errored or canceled while it ran, or never reached (HCP's `unreachable`).
  if (!(`${phase.running}-at` in run.statusTimestamps)) return 'unreachable';
  return run.status === 'errored' ? 'errored' : 'canceled';
}

function timestampsOf(run: ExecutionSubject, phase: Phase): Record<string, string> {
  const at = run.statusTimestamps;
  const status = statusOf(run, phase);
  const started = at[`${phase.running}-at`];
  const entries: [string, string | undefined][] = [
    ['queued-at', started],
    ['started-at', started],
    ['finished-at', at[`${phase.done}-at`]],
    ['errored-at', status === 'errored' ? at['errored-at'] : undefined],
    ['canceled-at', status === 'canceled' ? (at['canceled-at'] ?? at['discarded-at']) : undefined],
  ];
  return Object.fromEntries(entries.filter((entry): entry is [string, string] => entry[1] !== undefined));
}

export const planStatus = (run: ExecutionSubject): ExecutionStatus => statusOf(run, PLAN);
export const applyStatus = (run: ExecutionSubject): ExecutionStatus => statusOf(run, APPLY);
export const planTimestamps = (run: ExecutionSubject): Record<string, string> => timestampsOf(run, PLAN);
export const applyTimestamps = (run: ExecutionSubject): Record<string, string> => timestampsOf(run, APPLY);

/** A run of a `local` workspace waits at these statuses for its pipeline's report. */
export const AWAITS_REPORT: ReadonlySet<RunStatus> = new Set(['planning', 'applying']);

export interface ReportWait extends ExecutionSubject {
  executionMode: ExecutionMode;
}

/** Whether a local run has waited for its pipeline's report for `timeoutSeconds` or more, as of `now` (the database's clock). */
export function reportOverdue(run: ReportWait, now: Date, timeoutSeconds: number): boolean {
  if (run.executionMode !== 'local' || !AWAITS_REPORT.has(run.status)) return false;
  const since = Date.parse(run.statusTimestamps[`${run.status}-at`] ?? '');
  return Number.isFinite(since) && now.getTime() - since >= timeoutSeconds * 1000;
}

/** The message of a local run that the pipeline left without a report. */
export function reportTimeoutMessage(awaited: RunStatus, timeoutSeconds: number): string {
  const what = awaited === 'applying' ? 'apply' : 'plan';
  return `The pipeline reported no ${what} within ${timeoutSeconds} seconds (LOCAL_EXECUTION_TIMEOUT_SECONDS); the run was ended.`;
}
