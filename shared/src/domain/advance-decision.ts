import { reportTimeoutMessage, type LocalTimeouts } from './executions.ts';
import { evaluateStage, nextRunStep, type RunSnapshot, type RunStep, type StageSnapshot } from './lifecycle.ts';
import type { EnforcementLevel, RunStage, RunStatus, TaskResultStatus, TaskStageStatus } from './statuses.ts';
import { statusTimestampKey } from './timestamps.ts';

/** A run's stage as an advance reads it. */
export interface AdvanceStage {
  id: string;
  stage: RunStage;
  status: TaskStageStatus;
  statusTimestamps: Record<string, string>;
}

/** A stage's result as an advance reads it. */
export interface AdvanceResult {
  id: string;
  stageId: string;
  status: TaskResultStatus;
  enforcementLevel: EnforcementLevel;
}

/** Runs that will not move again on their own (`applied` may still go on to post_apply). */
export const ENDED_RUNS: ReadonlySet<RunStatus> = new Set([
  'errored',
  'planned_and_finished',
  'post_apply_completed',
  'canceled',
  'discarded',
]);

/** The stages as the lifecycle rule sees them: evaluated from their results. */
export function stageSnapshots(stages: readonly AdvanceStage[], results: readonly AdvanceResult[]): StageSnapshot[] {
  return stages.map((stage) => ({
    stage: stage.stage,
    status: stage.status,
    overridden: stage.status === 'running' && 'awaiting-override-at' in stage.statusTimestamps,
    evaluation: evaluateStage(
      stage.stage,
      results
        .filter((result) => result.stageId === stage.id)
        .map((result) => ({ status: result.status, enforcementLevel: result.enforcementLevel })),
    ),
  }));
}

/** Everything an advance moves at once, decided in memory: what its one write sets. */
export interface AdvanceDecision {
  runStatus: RunStatus;
  /** One `<status>-at` key per run transition taken (the version moves by their number). */
  runTransitions: string[];
  warning: boolean;
  /** The executor's steps to take, in order, before the write. */
  executions: ('plan' | 'apply')[];
  /** Why the run's plan or apply errored, where the advance ends it for a report that never came. */
  executionError: string | undefined;
  /** Each moved stage's final status and every `<status>-at` key it passed. */
  stageWrites: Map<string, { status: TaskStageStatus; keys: string[] }>;
  /** The pending results that start (those of the stages that start). */
  startedResultIds: string[];
  /** The stages that never started and end with the run (with their pending results). */
  unstartedStageIds: string[];
}

const MAX_STEPS = 32;

/**
 * The steps a run can take now, from one read of it: `nextRunStep` applied until it waits, on copies
 * of what was read. Pure: the caller runs the executions and writes the decision.
 */
export function decideAdvance(
  run: RunSnapshot,
  readStages: readonly AdvanceStage[],
  readResults: readonly AdvanceResult[],
  localTimeouts: LocalTimeouts,
): AdvanceDecision {
  const snapshot = { ...run };
  const stages = readStages.map((stage) => ({ ...stage }));
  const results = readResults.map((result) => ({ ...result }));
  const decision: AdvanceDecision = {
    runStatus: run.status,
    runTransitions: [],
    warning: false,
    executions: [],
    executionError: undefined,
    stageWrites: new Map(),
    startedResultIds: [],
    unstartedStageIds: [],
  };
  const setRun = (status: RunStatus, warning = false): void => {
    decision.runTransitions.push(statusTimestampKey(status));
    decision.warning ||= warning;
    snapshot.status = status;
  };
  const setStage = (stage: AdvanceStage, status: TaskStageStatus): void => {
    const key = statusTimestampKey(status);
    const write = decision.stageWrites.get(stage.id) ?? { status, keys: [] };
    write.status = status;
    write.keys.push(key);
    decision.stageWrites.set(stage.id, write);
    stage.status = status;
    stage.statusTimestamps = { ...stage.statusTimestamps, [key]: stage.statusTimestamps[key] ?? new Date().toISOString() };
  };
  const startStage = (name: RunStage): void => {
    const stage = stages.find((candidate) => candidate.stage === name);
    if (!stage) return;
    if (stage.status === 'pending') setStage(stage, 'running');
    // Its pending results start (written where the run's version holds: no other advance starts them).
    for (const result of results) {
      if (result.stageId !== stage.id || result.status !== 'pending') continue;
      result.status = 'running';
      decision.startedResultIds.push(result.id);
    }
  };
  const take = (step: Exclude<RunStep, { kind: 'wait' }>): void => {
    switch (step.kind) {
      case 'set-run':
        return setRun(step.status);
      case 'plan':
      case 'apply':
        decision.executions.push(step.kind);
        return setRun(step.kind === 'plan' ? 'planned' : 'applied');
      case 'report-overdue':
        decision.executionError = reportTimeoutMessage(step.awaited, localTimeouts);
        return setRun('errored');
      case 'start-stage':
        startStage(step.stage);
        return setRun(step.runStatus);
      case 'finish-stage': {
        const stage = stages.find((candidate) => candidate.stage === step.stage);
        if (stage) setStage(stage, step.stageStatus);
        return setRun(step.runStatus, step.warning);
      }
    }
  };
  for (
    let step = nextRunStep(snapshot, stageSnapshots(stages, results)), count = 0;
    step.kind !== 'wait' && count < MAX_STEPS;
    count += 1
  ) {
    take(step);
    step = nextRunStep(snapshot, stageSnapshots(stages, results));
  }
  decision.runStatus = snapshot.status;
  // A run that stopped early leaves later stages unstarted: they will never run, so they end too (with
  // their pending results). Stages are never pending again once moved, so the read shows every one.
  if (ENDED_RUNS.has(snapshot.status))
    decision.unstartedStageIds = stages.filter((stage) => stage.status === 'pending').map((stage) => stage.id);
  return decision;
}
