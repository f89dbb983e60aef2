import { describe, expect, it } from '@jest/globals';
import {
  configurationProblem,
  DELIVERY_RESPONSES_KEPT,
  mergeDeliveryResponses,
  NOTICE_STATUSES,
  noticeMessage,
  noticeOfChange,
  runNotice,
  type NoticeTask,
} from './notifications.ts';
import { RUN_STATUSES, type RunStatus } from './statuses.ts';

const manual = { autoApply: false, planOnly: false };
const auto = { autoApply: true, planOnly: false };

describe('runNotice', () => {
  it.each<[RunStatus | null, RunStatus, typeof manual, string | null, string]>([
    [null, 'pending', manual, 'run:created', ''],
    ['pending', 'planning', manual, 'run:planning', ''],
    ['pre_plan_running', 'pre_plan_awaiting_decision', auto, 'run:needs_attention', 'pre_plan_awaiting_decision'],
    ['post_plan_running', 'post_plan_awaiting_decision', auto, 'run:needs_attention', 'post_plan_awaiting_decision'],
    ['planning', 'planned', manual, 'run:needs_attention', 'confirmation'],
    ['post_plan_running', 'post_plan_completed', manual, 'run:needs_attention', 'confirmation'],
    ['planning', 'planned', auto, null, ''],
    ['planning', 'planned', { autoApply: false, planOnly: true }, null, ''],
    ['confirmed', 'applying', manual, 'run:applying', ''],
    ['applying', 'applied', manual, 'run:completed', ''],
    ['planned', 'planned_and_finished', manual, 'run:completed', ''],
    ['post_apply_running', 'post_apply_completed', manual, 'run:completed', ''],
    ['post_plan_running', 'errored', manual, 'run:errored', ''],
    ['applying', 'canceled', manual, 'run:errored', ''],
    ['planned', 'discarded', manual, null, ''],
    ['pending', 'pre_plan_running', manual, null, ''],
    ['planning', 'planning', manual, null, ''],
  ])('%s → %s gives %s', (from, to, run, trigger, occasion) => {
    const notice = runNotice(from, to, run);
    expect(notice?.trigger ?? null).toBe(trigger);
    if (notice) expect(notice.occasion).toBe(occasion);
  });

  it("gives a notice for a change to a status only if it is one of NOTICE_STATUSES (what the runs' trigger records)", () => {
    const runs = [manual, auto, { autoApply: false, planOnly: true }];
    const giving = RUN_STATUSES.filter((to) => RUN_STATUSES.some((from) => runs.some((run) => runNotice(from, to, run) !== null)));
    expect([...giving].sort()).toEqual([...NOTICE_STATUSES].sort());
  });

  it('is, told before the run is read, what runNotice gives the run: a wait for confirmation only while the run still waits there', () => {
    const runs = [manual, auto, { autoApply: false, planOnly: true }, { autoApply: true, planOnly: true }];
    const mismatches: unknown[] = [];
    for (const from of [null, ...RUN_STATUSES])
      for (const to of RUN_STATUSES)
        for (const run of runs)
          for (const current of [to, to === 'applied' ? 'errored' : 'applied'] as const) {
            const change = noticeOfChange(from, to);
            const waiting = !run.autoApply && !run.planOnly && current === to;
            const told = change && (!change.onlyWhileAwaitingConfirmation || waiting) ? change.notice : null;
            const notice = runNotice(from, to, run);
            const expected = notice && (notice.occasion !== 'confirmation' || current === to) ? notice : null;
            if (JSON.stringify(told) !== JSON.stringify(expected)) mismatches.push({ from, to, run, current, told, expected });
          }
    expect(mismatches).toEqual([]);
    expect(noticeOfChange('planning', 'planned')).toEqual({
      notice: { trigger: 'run:needs_attention', occasion: 'confirmation' },
      onlyWhileAwaitingConfirmation: true,
    });
    expect(noticeOfChange('applying', 'applied')).toEqual({
      notice: { trigger: 'run:completed', occasion: '' },
      onlyWhileAwaitingConfirmation: false,
    });
  });
});

describe('noticeMessage', () => {
  const failed: NoticeTask = { name: 'scan', stage: 'post_plan', enforcement: 'mandatory', status: 'failed', message: 'bucket is public' };
  const advisory: NoticeTask = { name: 'cost', stage: 'post_plan', enforcement: 'advisory', status: 'unreachable', message: '' };
  const passed: NoticeTask = { name: 'lint', stage: 'pre_plan', enforcement: 'mandatory', status: 'passed', message: '' };

  it.each<[string, Parameters<typeof noticeMessage>, string]>([
    [
      'an override, naming the tasks, mandatory first',
      [
        { trigger: 'run:needs_attention', occasion: 'post_plan_awaiting_decision' },
        'post_plan_awaiting_decision',
        [advisory, passed, failed],
      ],
      'Run Needs Attention: a task stage awaits an override; mandatory task scan failed at post-plan (bucket is public); advisory task cost unreachable at post-plan',
    ],
    [
      'a confirmation',
      [{ trigger: 'run:needs_attention', occasion: 'confirmation' }, 'planned', [passed]],
      'Run Needs Attention: the plan awaits confirmation',
    ],
    [
      'an errored run',
      [{ trigger: 'run:errored', occasion: '' }, 'errored', [failed]],
      'Run Errored: mandatory task scan failed at post-plan (bucket is public)',
    ],
    ['a canceled run', [{ trigger: 'run:errored', occasion: '' }, 'canceled', []], 'Run Canceled'],
    ['a completed run, without tasks', [{ trigger: 'run:completed', occasion: '' }, 'applied', [failed]], 'Run Applied'],
  ])('%s', (_label, args, expected) => {
    expect(noticeMessage(...args)).toBe(expected);
  });
});

describe('configurationProblem', () => {
  const base = { subscribable: 'workspaces' as const, triggers: [], url: null, emailAddresses: [], emailUserIds: [] };
  const hook = { ...base, destinationType: 'generic' as const, url: 'https://example.com/' };
  it.each([
    [{ ...base, destinationType: 'generic' as const }, '/data/attributes/url'],
    [{ ...base, destinationType: 'microsoft-teams' as const }, '/data/attributes/url'],
    [{ ...base, destinationType: 'email' as const, url: 'https://example.com/' }, '/data/attributes/url'],
    [
      { ...base, destinationType: 'slack' as const, url: 'https://hooks.slack.com/x', emailAddresses: ['a@b.c'] },
      '/data/attributes/email-addresses',
    ],
    [
      { ...base, destinationType: 'slack' as const, url: 'https://hooks.slack.com/x', emailUserIds: ['user-1'] },
      '/data/relationships/users',
    ],
    [{ ...base, destinationType: 'slack' as const, url: 'https://hooks.slack.com/x' }, null],
    [{ ...base, destinationType: 'email' as const, emailUserIds: ['user-1'] }, null],
    // A workspace takes run, assessment and auto-destroy triggers; a team change requests only.
    [{ ...hook, triggers: ['run:created' as const, 'assessment:failed' as const] }, null],
    [{ ...hook, triggers: ['run:created' as const, 'change_request:created' as const] }, '/data/attributes/triggers/1'],
    [{ ...hook, subscribable: 'teams' as const, triggers: ['change_request:created' as const] }, null],
    [{ ...hook, subscribable: 'teams' as const, triggers: ['run:errored' as const] }, '/data/attributes/triggers/0'],
  ])('%j → %s', (shape, pointer) => {
    expect(configurationProblem(shape)?.pointer ?? null).toBe(pointer);
  });
});

describe('mergeDeliveryResponses', () => {
  const at = (second: number, tag: string) => ({ 'sent-at': new Date(Date.UTC(2026, 10, 28, 0, 0, second)).toISOString(), tag });

  it('puts the answers of every list in one order, the latest first, whichever list holds them', () => {
    // A delivery retried (its answers at 9 and 1), another answered at 5, the verification at 0.
    const merged = mergeDeliveryResponses([[at(9, 'a2'), at(1, 'a1')], [at(5, 'b')], [at(0, 'verified')]]);
    expect(merged.map((response) => response.tag)).toEqual(['a2', 'b', 'a1', 'verified']);
  });

  it(`keeps at most ${DELIVERY_RESPONSES_KEPT}, the latest`, () => {
    const many = Array.from({ length: 15 }, (_, index) => [at(index, `r${index}`)]);
    const merged = mergeDeliveryResponses(many);
    expect(merged).toHaveLength(DELIVERY_RESPONSES_KEPT);
    expect(merged[0]?.tag).toBe('r14');
    expect(merged.at(-1)?.tag).toBe('r5');
  });

  it('keeps the lists’ order for answers of the same instant, and counts an unreadable time as the oldest', () => {
    const merged = mergeDeliveryResponses([[at(3, 'first')], [{ 'sent-at': 'never', tag: 'odd' }, at(3, 'second')]]);
    expect(merged.map((response) => response.tag)).toEqual(['first', 'second', 'odd']);
  });
});
