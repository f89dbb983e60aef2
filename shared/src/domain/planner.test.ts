import { describe, expect, it } from '@jest/globals';
import { planTaskStages, runStagesFor, type PlannableTask, type PlannedStage } from './planner.ts';
import { RUN_STAGES, type RunStage } from './statuses.ts';

function task(taskId: string, stages: readonly RunStage[], overrides: Partial<PlannableTask> = {}): PlannableTask {
  return {
    taskId,
    workspaceTaskId: `wstask-${taskId}`,
    name: taskId,
    url: `https://${taskId}.example.test/hook`,
    hmacKeyEncrypted: null,
    enabled: true,
    enforcementLevel: 'advisory',
    stages,
    ...overrides,
  };
}

function global(taskId: string, stages: readonly RunStage[], overrides: Partial<PlannableTask> = {}): PlannableTask {
  return task(taskId, stages, { workspaceTaskId: null, ...overrides });
}

/** The plan as `stage: task, task` strings, which makes tables readable. */
const summary = (planned: PlannedStage[]): string[] =>
  planned.map(({ stage, tasks }) => `${stage}: ${tasks.map((t) => t.taskId).join(',')}`);

describe('runStagesFor', () => {
  it.each([
    { speculative: false, expected: ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'] },
    { speculative: true, expected: ['pre_plan', 'post_plan'] },
  ])('speculative=$speculative → $expected', ({ speculative, expected }) => {
    expect(runStagesFor(speculative)).toEqual(expected);
  });

  it('follows RUN_STAGES order and returns a fresh array', () => {
    const stages = runStagesFor(false);
    expect(stages).toEqual([...RUN_STAGES]);
    stages.pop();
    expect(runStagesFor(false)).toHaveLength(RUN_STAGES.length);
  });
});

describe('planTaskStages', () => {
  const all = RUN_STAGES;

  it.each<{ name: string; workspace: PlannableTask[]; globals: PlannableTask[]; speculative: boolean; expected: string[] }>([
    { name: 'no tasks at all → no stages', workspace: [], globals: [], speculative: false, expected: [] },
    { name: 'no tasks, speculative → no stages', workspace: [], globals: [], speculative: true, expected: [] },
    {
      name: 'stage order follows RUN_STAGES whatever order the task lists them in',
      workspace: [task('a', ['post_apply', 'pre_apply', 'post_plan', 'pre_plan'])],
      globals: [],
      speculative: false,
      expected: ['pre_plan: a', 'post_plan: a', 'pre_apply: a', 'post_apply: a'],
    },
    {
      name: 'speculative runs only get pre_plan and post_plan',
      workspace: [task('a', all)],
      globals: [global('g', all)],
      speculative: true,
      expected: ['pre_plan: a,g', 'post_plan: a,g'],
    },
    {
      name: 'speculative run with only apply-stage tasks → no stages',
      workspace: [task('a', ['pre_apply'])],
      globals: [global('g', ['post_apply'])],
      speculative: true,
      expected: [],
    },
    {
      name: 'stages without tasks are omitted',
      workspace: [task('a', ['post_plan']), task('b', ['post_apply'])],
      globals: [],
      speculative: false,
      expected: ['post_plan: a', 'post_apply: b'],
    },
    {
      name: 'disabled workspace tasks are skipped',
      workspace: [task('a', ['pre_plan'], { enabled: false }), task('b', ['pre_plan', 'post_plan'])],
      globals: [],
      speculative: false,
      expected: ['pre_plan: b', 'post_plan: b'],
    },
    {
      name: 'disabled global tasks are skipped',
      workspace: [],
      globals: [global('g', ['pre_plan'], { enabled: false }), global('h', ['pre_apply'])],
      speculative: false,
      expected: ['pre_apply: h'],
    },
    {
      name: 'a stage whose only task is disabled is omitted',
      workspace: [task('a', ['pre_apply'], { enabled: false })],
      globals: [],
      speculative: false,
      expected: [],
    },
    {
      name: 'task order within a stage is preserved, workspace tasks before globals',
      workspace: [task('c', ['pre_plan']), task('a', ['pre_plan']), task('b', ['pre_plan'])],
      globals: [global('z', ['pre_plan']), global('y', ['pre_plan'])],
      speculative: false,
      expected: ['pre_plan: c,a,b,z,y'],
    },
    {
      name: 'a task on several stages appears in each',
      workspace: [task('a', ['pre_plan', 'pre_apply']), task('b', ['pre_apply'])],
      globals: [global('g', ['pre_plan', 'post_apply'])],
      speculative: false,
      expected: ['pre_plan: a,g', 'pre_apply: a,b', 'post_apply: g'],
    },
    {
      name: 'a task both attached and global is planned once, on the workspace stages only',
      workspace: [task('a', ['post_plan'])],
      globals: [global('a', ['pre_plan', 'post_plan'])],
      speculative: false,
      expected: ['post_plan: a'],
    },
    {
      name: 'an attached-and-global task disabled on the workspace side is not revived by the global',
      workspace: [task('a', ['pre_plan'], { enabled: false })],
      globals: [global('a', ['pre_plan'])],
      speculative: false,
      expected: [],
    },
  ])('$name', ({ workspace, globals, speculative, expected }) => {
    expect(summary(planTaskStages({ workspaceTasks: workspace, globalTasks: globals, speculative }))).toEqual(expected);
  });

  it('a task both attached and global carries the workspace settings', () => {
    const attached = task('shared', ['pre_plan'], { workspaceTaskId: 'wstask-1', enforcementLevel: 'advisory', name: 'ws name' });
    const globalCopy = global('shared', ['pre_plan', 'post_plan'], { enforcementLevel: 'mandatory', name: 'global name' });
    const planned = planTaskStages({ workspaceTasks: [attached], globalTasks: [globalCopy], speculative: false });
    expect(planned).toHaveLength(1);
    expect(planned[0]?.tasks).toHaveLength(1);
    expect(planned[0]?.tasks[0]).toBe(attached);
    expect(planned[0]?.tasks[0]).toMatchObject({ workspaceTaskId: 'wstask-1', enforcementLevel: 'advisory', name: 'ws name' });
  });

  it('keeps global tasks as given (workspaceTaskId null, their own enforcement)', () => {
    const g = global('g', ['post_plan'], { enforcementLevel: 'mandatory' });
    const [stage] = planTaskStages({ workspaceTasks: [], globalTasks: [g], speculative: false });
    expect(stage).toEqual({ stage: 'post_plan', tasks: [g] });
    expect(stage?.tasks[0]?.workspaceTaskId).toBeNull();
  });

  it.each([false, true])('every planned stage is non-empty, allowed, unique and in RUN_STAGES order (speculative=%s)', (speculative) => {
    const planned = planTaskStages({
      workspaceTasks: [task('a', all), task('b', ['post_apply']), task('off', all, { enabled: false })],
      globalTasks: [global('g', ['pre_apply', 'pre_plan']), global('a', all)],
      speculative,
    });
    const stages = planned.map((p) => p.stage);
    const allowed = runStagesFor(speculative);
    expect(stages).toEqual(allowed.filter((stage) => stages.includes(stage)));
    for (const { stage, tasks } of planned) {
      expect(tasks.length).toBeGreaterThan(0);
      expect(new Set(tasks.map((t) => t.taskId)).size).toBe(tasks.length);
      for (const t of tasks) {
        expect(t.enabled).toBe(true);
        expect(t.stages).toContain(stage);
      }
    }
  });
});
