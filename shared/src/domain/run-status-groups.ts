import { DISCARDABLE_RUN_STATUSES } from './run-transitions.ts';
import { FINAL_RUN_STATUSES, RUN_STATUSES, type RunStatus } from './statuses.ts';

/**
 * HCP's `filter[status_group]` on an organization's runs: the final statuses, the others, and those a
 * run can be discarded in (the statuses the discard action takes here).
 */
export const RUN_STATUS_GROUPS = ['non_final', 'final', 'discardable'] as const;
export type RunStatusGroup = (typeof RUN_STATUS_GROUPS)[number];

const IN_GROUP: Record<RunStatusGroup, (status: RunStatus) => boolean> = {
  final: (status) => FINAL_RUN_STATUSES.has(status),
  non_final: (status) => !FINAL_RUN_STATUSES.has(status),
  discardable: (status) => DISCARDABLE_RUN_STATUSES.has(status),
};

/** The statuses of a group, in lifecycle order. */
export const statusesOfGroup = (group: RunStatusGroup): RunStatus[] => RUN_STATUSES.filter(IN_GROUP[group]);
