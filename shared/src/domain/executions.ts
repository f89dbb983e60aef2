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

/**
 * How long a local run waits for its pipeline's report, in seconds, at `planning` (LOCAL_PLAN_TIMEOUT_SECONDS)
 * and at `applying` (LOCAL_APPLY_TIMEOUT_SECONDS). Why the defaults: docs/pipelines.md, "A pipeline that disappears".
 */
export interface LocalTimeouts {
  planning: number;
  applying: number;
}

export const DEFAULT_LOCAL_TIMEOUTS: LocalTimeouts = { planning: 1800, applying: 3600 };

const timeoutOf = (awaited: RunStatus, timeouts: LocalTimeouts): number => (awaited === 'applying' ? timeouts.applying : timeouts.planning);

/** Whether a local run has waited for its pipeline's report for its timeout or more, as of `now` (the database's clock). */
export function reportOverdue(run: ReportWait, now: Date, timeouts: LocalTimeouts): boolean {
  if (run.executionMode !== 'local' || !AWAITS_REPORT.has(run.status)) return false;
  const since = Date.parse(run.statusTimestamps[`${run.status}-at`] ?? '');
  return Number.isFinite(since) && now.getTime() - since >= timeoutOf(run.status, timeouts) * 1000;
}

/** The message of a local run that the pipeline left without a report. */
export function reportTimeoutMessage(awaited: RunStatus, timeouts: LocalTimeouts): string {
  const [what, setting] = awaited === 'applying' ? ['apply', 'LOCAL_APPLY_TIMEOUT_SECONDS'] : ['plan', 'LOCAL_PLAN_TIMEOUT_SECONDS'];
  return `The pipeline reported no ${what} within ${timeoutOf(awaited, timeouts)} seconds (${setting}); the run was ended.`;
}
