import { type EnforcementLevel, type RunStage } from '@runtasks/shared/domain';
import { type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  type RunTaskMode,
  type RunTaskServer,
  type TaskResultStatus as TaskServerResult,
} from '../../../../examples/run-task-server/server.ts';

/** Timings of the workers under test, and the views of runs, stages, results and attempts the tests read. */

export const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
export const PROGRESS_TIMEOUT_SECONDS = 4;
export const PROGRESS_TIMEOUT_MS = PROGRESS_TIMEOUT_SECONDS * 1000;
export const TIMINGS = {
  TASK_PROGRESS_TIMEOUT_SECONDS: String(PROGRESS_TIMEOUT_SECONDS),
  TASK_RETRY_DELAYS_SECONDS: '0.2,0.2',
  SWEEPER_INTERVAL_SECONDS: '0.5',
};
/** Final for the worker: it never moves a run on from these by itself. */
export const TERMINAL = new Set(['errored', 'canceled', 'discarded', 'planned_and_finished', 'post_apply_completed']);
export const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

export interface WorkerProcess {
  child: ChildProcess;
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface RunView {
  id: string;
  status: string;
  timestamps: Record<string, string>;
  warnings: boolean;
  planId: string;
  createdAt: string;
  stageIds: string[];
}

export interface StageView {
  id: string;
  stage: RunStage;
  status: string;
  timestamps: Record<string, string>;
  resultIds: string[];
}

export interface ResultView {
  id: string;
  status: string;
  taskId: string;
  message: string | null;
  enforcement: EnforcementLevel;
  outcomesCount: number;
  timestamps: Record<string, string>;
}

export interface AttemptView {
  attempt: number;
  'http-status': number | null;
  'error-kind': string | null;
}

/** What a task does when called; `refused` and `blocked` are destinations that cannot be delivered to. */
export interface TaskSpec {
  mode?: RunTaskMode;
  result?: TaskServerResult;
  enforcement?: EnforcementLevel;
  stages?: RunStage[];
  hmacKey?: string;
  callbackDelayMs?: number;
  readPlan?: boolean;
  destination?: 'refused' | 'blocked';
  /** Put a delaying proxy in front of the task server (a slow network path to it). */
  delayMs?: number;
}

export interface TaskSetup {
  taskId: string;
  server: RunTaskServer;
}
