import type { ExecutionMode, RunStatus } from './statuses.ts';

export const RUN_ACTIONS = ['apply', 'cancel', 'discard'] as const;
export type RunAction = (typeof RUN_ACTIONS)[number];

/** Runs doing work: cancel stops them. */
const CANCELABLE: ReadonlySet<RunStatus> = new Set([
  'pending',
  'pre_plan_running',
  'pre_plan_completed',
  'planning',
  'post_plan_running',
  'confirmed',
  'pre_apply_running',
  'pre_apply_completed',
  'applying',
]);

/**
 * Runs waiting for a person, or whose plan's checks are still running: discard ends them without
 * applying. HCP's `discardable` status group has post_plan_running (its run status groups).
 */
export const DISCARDABLE_RUN_STATUSES: ReadonlySet<RunStatus> = new Set([
  'pending',
  'planned',
  'post_plan_running',
  'post_plan_completed',
  'pre_plan_awaiting_decision',
  'post_plan_awaiting_decision',
  'pre_apply_awaiting_decision',
]);

/** Runs whose plan is done and which wait for confirmation. */
const CONFIRMABLE: ReadonlySet<RunStatus> = new Set(['planned', 'post_plan_completed']);

export interface RunActionSubject {
  status: RunStatus;
  planOnly: boolean;
  /** A local run whose reported plan changes nothing: there is nothing to apply (it ends planned_and_finished). */
  nothingToApply?: boolean;
}

/** What the action rules need of a run. */
export const runActionSubject = (run: {
  status: RunStatus;
  planOnly: boolean;
  executionMode: ExecutionMode;
  hasChanges: boolean;
}): RunActionSubject => ({
  status: run.status,
  planOnly: run.planOnly,
  nothingToApply: run.executionMode === 'local' && !run.hasChanges,
});

/** The status an action moves a run to, or null when the transition is not allowed. */
export function runActionTarget(action: RunAction, run: RunActionSubject): RunStatus | null {
  switch (action) {
    case 'apply':
      return !run.planOnly && run.nothingToApply !== true && CONFIRMABLE.has(run.status) ? 'confirmed' : null;
    case 'cancel':
      return CANCELABLE.has(run.status) ? 'canceled' : null;
    case 'discard':
      return DISCARDABLE_RUN_STATUSES.has(run.status) ? 'discarded' : null;
  }
}

/** Statuses from which an action may start; used for conditional updates (`WHERE status IN …`). */
export function runActionSources(action: RunAction): RunStatus[] {
  switch (action) {
    case 'apply':
      return [...CONFIRMABLE];
    case 'cancel':
      return [...CANCELABLE];
    case 'discard':
      return [...DISCARDABLE_RUN_STATUSES];
  }
}
