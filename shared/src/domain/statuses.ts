/** Run stages at which tasks can run, in lifecycle order. */
export const RUN_STAGES = ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'] as const;
export type RunStage = (typeof RUN_STAGES)[number];

export const ENFORCEMENT_LEVELS = ['advisory', 'mandatory'] as const;
export type EnforcementLevel = (typeof ENFORCEMENT_LEVELS)[number];

export const TASK_STAGE_STATUSES = [
  'pending',
  'running',
  'passed',
  'failed',
  'awaiting_override',
  'errored',
  'canceled',
  'unreachable',
] as const;
export type TaskStageStatus = (typeof TASK_STAGE_STATUSES)[number];

export const TASK_RESULT_STATUSES = ['pending', 'running', 'passed', 'failed', 'errored', 'canceled', 'unreachable'] as const;
export type TaskResultStatus = (typeof TASK_RESULT_STATUSES)[number];

/** The run statuses this service moves through (a subset of HCP's, in lifecycle order, then the final ones). */
export const RUN_STATUSES = [
  'pending',
  'pre_plan_running',
  'pre_plan_completed',
  'pre_plan_awaiting_decision',
  'planning',
  'planned',
  'post_plan_running',
  'post_plan_completed',
  'post_plan_awaiting_decision',
  'confirmed',
  'pre_apply_running',
  'pre_apply_completed',
  'pre_apply_awaiting_decision',
  'applying',
  'applied',
  'post_apply_running',
  'post_apply_completed',
  'planned_and_finished',
  'discarded',
  'errored',
  'canceled',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export const FINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set([
  'post_apply_completed',
  'applied',
  'planned_and_finished',
  'discarded',
  'errored',
  'canceled',
]);

export const TEAM_RUNS_ACCESS = ['read', 'plan', 'apply'] as const;
export type TeamRunsAccess = (typeof TEAM_RUNS_ACCESS)[number];

/** Who sees a team: its members only (HCP's default) or the whole organization. */
export const TEAM_VISIBILITIES = ['secret', 'organization'] as const;
export type TeamVisibility = (typeof TEAM_VISIBILITIES)[number];

export const TEAM_WORKSPACE_ACCESS = ['read', 'plan', 'write', 'admin', 'custom'] as const;
export type TeamWorkspaceAccess = (typeof TEAM_WORKSPACE_ACCESS)[number];

/** Where Terraform runs for a workspace's runs: `remote`, the built-in executor; `local`, the user's pipeline, which reports plan and apply. */
export const EXECUTION_MODES = ['remote', 'local'] as const;
export type ExecutionMode = (typeof EXECUTION_MODES)[number];

/** A plan's and an apply's statuses, as HCP names them (the ones this service reaches). */
export const EXECUTION_STATUSES = ['pending', 'running', 'finished', 'errored', 'canceled', 'unreachable'] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];

/** An organization membership: `invited` (granting nothing) until its user accepts it (users.service.ts acceptInvitation), then `active`. */
export const MEMBERSHIP_STATUSES = ['invited', 'active'] as const;
export type MembershipStatus = (typeof MEMBERSHIP_STATUSES)[number];
