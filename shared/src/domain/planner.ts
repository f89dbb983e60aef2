import { RUN_STAGES, type EnforcementLevel, type RunStage } from './statuses.ts';

/** A task as the planner sees it: a workspace association, or a global task applied to every workspace. */
export interface PlannableTask {
  taskId: string;
  workspaceTaskId: string | null;
  name: string;
  url: string;
  hmacKeyEncrypted: string | null;
  enabled: boolean;
  enforcementLevel: EnforcementLevel;
  stages: readonly RunStage[];
}

export interface PlannedStage {
  stage: RunStage;
  tasks: PlannableTask[];
}

export interface PlanInput {
  workspaceTasks: readonly PlannableTask[];
  globalTasks: readonly PlannableTask[];
  /** Speculative and plan-only runs are never confirmed, so they only get pre_plan and post_plan. */
  speculative: boolean;
}

const SPECULATIVE_STAGES: ReadonlySet<RunStage> = new Set(['pre_plan', 'post_plan']);

export function runStagesFor(speculative: boolean): RunStage[] {
  return RUN_STAGES.filter((stage) => !speculative || SPECULATIVE_STAGES.has(stage));
}

/**
 * Plans a run's task stages: one stage per run stage that has enabled tasks, one entry per task.
 * A task attached to the workspace and also global is planned once, with the workspace's settings.
 */
export function planTaskStages(input: PlanInput): PlannedStage[] {
  const attached = new Set(input.workspaceTasks.map((task) => task.taskId));
  const candidates = [...input.workspaceTasks, ...input.globalTasks.filter((task) => !attached.has(task.taskId))].filter(
    (task) => task.enabled,
  );
  return runStagesFor(input.speculative)
    .map((stage) => ({ stage, tasks: candidates.filter((task) => task.stages.includes(stage)) }))
    .filter((planned) => planned.tasks.length > 0);
}
