// The real side of lifecycle.model.test.ts: the pure rules with the API's and the worker's bookkeeping.
import { evaluateStage, nextRunStep, type RunSnapshot, type StageSnapshot } from './lifecycle.ts';
import { runActionTarget, type RunAction } from './run-transitions.ts';
import { type RunStage, type RunStatus, type TaskResultStatus, type TaskStageStatus } from './statuses.ts';
import { statusTimestampKey } from './timestamps.ts';
import { type Level } from './lifecycle.hcp-model.ts';

// ---------------------------------------------------------------------------------------------
// The real side: the pure rules, and the bookkeeping the API and the worker do around them.

export interface RealStage {
  status: TaskStageStatus;
  overridden: boolean;
  results: { enforcementLevel: Level; status: TaskResultStatus }[];
}
export interface Real {
  run: RunSnapshot;
  warnings: boolean;
  stages: Map<RunStage, RealStage>;
  /** status-timestamps of the run: key → the step that set it. */
  timestamps: Map<string, number>;
  clock: number;
}

/** The worker's ENDED (advance-run.ts): runs that will not move again; their unstarted stages end. */
export const ENDED: ReadonlySet<RunStatus> = new Set(['errored', 'planned_and_finished', 'post_apply_completed', 'canceled', 'discarded']);

export function enterRunStatus(real: Real, status: RunStatus): void {
  const key = statusTimestampKey(status);
  if (real.timestamps.has(key)) throw new Error(`the run entered ${status} a second time`);
  real.clock += 1;
  real.timestamps.set(key, real.clock);
  real.run = { ...real.run, status };
}

export const snapshots = (real: Real): StageSnapshot[] =>
  [...real.stages.entries()].map(([stage, snapshot]) => ({
    stage,
    status: snapshot.status,
    overridden: snapshot.overridden,
    evaluation: evaluateStage(stage, snapshot.results),
  }));

/** The worker's loop: apply nextRunStep until it says wait (bounded: it must come to rest). */
export function drive(real: Real): void {
  for (let steps = 0; steps < 50; steps += 1) {
    const step = nextRunStep(real.run, snapshots(real));
    switch (step.kind) {
      case 'wait':
        if (ENDED.has(real.run.status)) {
          for (const stage of real.stages.values()) {
            if (stage.status !== 'pending') continue;
            for (const result of stage.results) if (result.status === 'pending') result.status = 'canceled';
            stage.status = 'canceled';
          }
        }
        return;
      case 'set-run':
        enterRunStatus(real, step.status);
        break;
      case 'start-stage': {
        const stage = real.stages.get(step.stage);
        if (!stage) throw new Error(`start-stage ${step.stage}: the run has no such stage`);
        stage.status = 'running';
        enterRunStatus(real, step.runStatus);
        break;
      }
      case 'finish-stage': {
        const stage = real.stages.get(step.stage);
        if (!stage) throw new Error(`finish-stage ${step.stage}: the run has no such stage`);
        stage.status = step.stageStatus;
        real.warnings ||= step.warning;
        enterRunStatus(real, step.runStatus);
        break;
      }
      case 'plan':
        enterRunStatus(real, 'planned');
        break;
      case 'apply':
        enterRunStatus(real, 'applied');
        break;
    }
  }
  throw new Error(`nextRunStep never said wait (run ${real.run.status})`);
}

/** The API's run action: runActionTarget decides; cancel and discard end every open result and stage. */
export function realAction(real: Real, action: RunAction): boolean {
  const target = runActionTarget(action, real.run);
  if (!target) return false;
  enterRunStatus(real, target);
  if (action !== 'apply') {
    for (const stage of real.stages.values()) {
      for (const result of stage.results) if (result.status === 'pending' || result.status === 'running') result.status = 'canceled';
      if (stage.status === 'pending' || stage.status === 'running' || stage.status === 'awaiting_override') stage.status = 'canceled';
    }
  }
  drive(real);
  return true;
}
