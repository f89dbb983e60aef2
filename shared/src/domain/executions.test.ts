import { describe, expect, it } from '@jest/globals';
import { applyStatus, applyTimestamps, planStatus, planTimestamps, reportOverdue, reportTimeoutMessage } from './executions.ts';
import type { ExecutionStatus, RunStatus } from './statuses.ts';

const T = '2026-11-26T10:00:00.000Z';
/** A run at `status` that passed through `passed` (their `-at` timestamps set). */
const run = (status: RunStatus, passed: string[] = []) => ({
  status,
  statusTimestamps: Object.fromEntries([...passed, status].map((key) => [`${key.replaceAll('_', '-')}-at`, T])),
});

describe('a run’s plan and apply statuses, from the run', () => {
  // prettier-ignore
  it.each<[string, ReturnType<typeof run>, ExecutionStatus, ExecutionStatus]>([
    ['pending',                                run('pending'),                                         'pending',     'pending'],
    ['in pre_plan',                            run('pre_plan_running'),                                'pending',     'pending'],
    ['planning',                               run('planning', ['pre_plan_running']),                  'running',     'pending'],
    ['planned',                                run('planned', ['planning']),                           'finished',    'pending'],
    ['waiting for confirmation',               run('post_plan_completed', ['planning', 'planned']),    'finished',    'pending'],
    ['applying',                               run('applying', ['planning', 'planned', 'confirmed']),  'finished',    'running'],
    ['applied',                                run('applied', ['planning', 'planned', 'applying']),    'finished',    'finished'],
    ['post_apply done',                        run('post_apply_completed', ['planning', 'planned', 'applying', 'applied']), 'finished', 'finished'],
    ['errored in pre_plan',                    run('errored', ['pre_plan_running']),                   'unreachable', 'unreachable'],
    ['errored while planning',                 run('errored', ['planning']),                           'errored',     'unreachable'],
    ['canceled while planning',                run('canceled', ['planning']),                          'canceled',    'unreachable'],
    ['errored in post_plan',                   run('errored', ['planning', 'planned']),                'finished',    'unreachable'],
    ['errored while applying',                 run('errored', ['planning', 'planned', 'applying']),    'finished',    'errored'],
    ['canceled while applying',                run('canceled', ['planning', 'planned', 'applying']),   'finished',    'canceled'],
    ['discarded before confirmation',          run('discarded', ['planning', 'planned']),              'finished',    'unreachable'],
    ['planned and finished (nothing to apply)', run('planned_and_finished', ['planning', 'planned']),  'finished',    'unreachable'],
  ])('%s', (_, subject, plan, apply) => {
    expect({ plan: planStatus(subject), apply: applyStatus(subject) }).toEqual({ plan, apply });
  });

  it('timestamps: queued and started when planning began, finished when planned; errored or canceled only for the phase that did', () => {
    const at = (key: string, minute: number) => [key, `2026-11-26T10:0${minute}:00.000Z`];
    const subject = {
      status: 'errored' as const,
      statusTimestamps: Object.fromEntries([at('planning-at', 1), at('planned-at', 2), at('applying-at', 3), at('errored-at', 4)]),
    };
    expect(planTimestamps(subject)).toEqual({
      'queued-at': '2026-11-26T10:01:00.000Z',
      'started-at': '2026-11-26T10:01:00.000Z',
      'finished-at': '2026-11-26T10:02:00.000Z',
    });
    expect(applyTimestamps(subject)).toEqual({
      'queued-at': '2026-11-26T10:03:00.000Z',
      'started-at': '2026-11-26T10:03:00.000Z',
      'errored-at': '2026-11-26T10:04:00.000Z',
    });
    expect(planTimestamps(run('pending'))).toEqual({});
  });
});

describe('reportOverdue: a local run left waiting for its pipeline', () => {
  const since = Date.parse(T);
  const waiting = (status: RunStatus, executionMode: 'local' | 'remote' = 'local') => ({ ...run(status), executionMode });
  // prettier-ignore
  it.each<[string, ReturnType<typeof waiting>, number, boolean]>([
    ['planning, before the timeout',   waiting('planning'),            59_999, false],
    ['planning, at the timeout',       waiting('planning'),            60_000, true],
    ['applying, past the plan timeout, before its own', waiting('applying'), 90_000, false],
    ['applying, at its own timeout',   waiting('applying'),           120_000, true],
    ['a remote run is never overdue',  waiting('planning', 'remote'),  90_000, false],
    ['a local run in a stage',         waiting('post_plan_running'),   90_000, false],
    ['a local run waiting for a person', waiting('post_plan_completed'), 90_000, false],
  ])('%s', (_, subject, elapsedMs, overdue) => {
    expect(reportOverdue(subject, new Date(since + elapsedMs), { planning: 60, applying: 120 })).toBe(overdue);
  });

  it('a run without its status timestamp is not judged overdue', () => {
    expect(
      reportOverdue({ status: 'planning', statusTimestamps: {}, executionMode: 'local' }, new Date(), { planning: 1, applying: 1 }),
    ).toBe(false);
  });

  it('says what was not reported, and which setting timed it', () => {
    const timeouts = { planning: 1800, applying: 3600 };
    expect(reportTimeoutMessage('planning', timeouts)).toContain('no plan within 1800 seconds (LOCAL_PLAN_TIMEOUT_SECONDS)');
    expect(reportTimeoutMessage('applying', timeouts)).toContain('no apply within 3600 seconds (LOCAL_APPLY_TIMEOUT_SECONDS)');
  });
});
