import { describe, expect, it } from '@jest/globals';
import {
  decideLock,
  decideUnlock,
  FORCE_CANCEL_COOL_OFF_MS,
  forceCancelAvailableAt,
  holdingSince,
  holdsWorkspace,
  isForceCancelable,
  lockedBy,
  nextToAdmit,
  planForceExecute,
  queueBusy,
  queueStateAtCreation,
  QUEUE_STATES,
  RELEASED_RUN_STATUSES,
  waitingFor,
  waitsInQueue,
  type LockOwner,
  type QueueHolder,
  type QueueView,
  type QueuedRun,
  type QueueState,
} from './run-queue.ts';
import { runActionTarget } from './run-transitions.ts';
import { FINAL_RUN_STATUSES, RUN_STATUSES, type RunStatus } from './statuses.ts';

const H = true;
const _ = false;

/**
 * Every status, by hand: whether an admitted run in it holds its workspace. `planned` and the
 * awaiting-decision statuses hold (HCP keeps the workspace until the run is applied or discarded);
 * the apply being done releases it, post-apply tasks included.
 */
// prettier-ignore
const HOLDS: Record<RunStatus, boolean> = {
  pending: H, pre_plan_running: H, pre_plan_completed: H, pre_plan_awaiting_decision: H, planning: H, planned: H,
  post_plan_running: H, post_plan_completed: H, post_plan_awaiting_decision: H, confirmed: H, pre_apply_running: H,
  pre_apply_completed: H, pre_apply_awaiting_decision: H, applying: H,
  applied: _, post_apply_running: _, post_apply_completed: _, planned_and_finished: _, discarded: _, errored: _, canceled: _,
};

const STATES: (QueueState | null)[] = [...QUEUE_STATES, null];

describe('who holds a workspace', () => {
  it.each(RUN_STATUSES.flatMap((status) => STATES.map((queueState) => [status, queueState] as const)))(
    '%s run, queue state %s',
    (status, queueState) => {
      expect(holdsWorkspace({ status, queueState })).toBe(queueState === 'holding' && HOLDS[status]);
      expect(waitsInQueue({ status, queueState })).toBe(queueState === 'queued' && status === 'pending');
    },
  );

  it('releases in every final status (a finished run never holds)', () => {
    for (const status of FINAL_RUN_STATUSES) expect(RELEASED_RUN_STATUSES.has(status)).toBe(true);
  });
});

describe('a run at creation', () => {
  it.each([
    [true, true, null],
    [true, false, null],
    [false, true, 'queued'],
    [false, false, 'holding'],
  ] as const)('plan-only %s, workspace busy %s: %s', (planOnly, busy, expected) => {
    expect(queueStateAtCreation({ planOnly }, { busy })).toBe(expected);
  });
});

const run = (id: string, status: RunStatus, queueState: QueueState | null): QueuedRun => ({ id, status, queueState });

describe('who is next', () => {
  const cases: [string, boolean, QueuedRun[], string | undefined, boolean][] = [
    ['an empty workspace', false, [], undefined, false],
    ['one waiting run', false, [run('a', 'pending', 'queued')], 'a', true],
    ['the oldest of two waiting runs', false, [run('a', 'pending', 'queued'), run('b', 'pending', 'queued')], 'a', true],
    ['nobody behind a holder', false, [run('a', 'planned', 'holding'), run('b', 'pending', 'queued')], undefined, true],
    ['nobody on a locked workspace', true, [run('a', 'pending', 'queued')], undefined, true],
    ['the next after a finished holder', false, [run('a', 'applied', 'holding'), run('b', 'pending', 'queued')], 'b', true],
    ['not a plan-only run (it never waits)', false, [run('p', 'pending', null)], undefined, false],
    ['past a plan-only run that runs', false, [run('p', 'planning', null), run('b', 'pending', 'queued')], 'b', true],
    ['not a canceled waiting run', false, [run('a', 'canceled', 'queued'), run('b', 'pending', 'queued')], 'b', true],
    [
      'nobody behind a holder in post-plan checks',
      false,
      [run('a', 'post_plan_running', 'holding'), run('b', 'pending', 'queued')],
      undefined,
      true,
    ],
    [
      'the next while the holder runs post-apply tasks',
      false,
      [run('a', 'post_apply_running', 'holding'), run('b', 'pending', 'queued')],
      'b',
      true,
    ],
    ['nobody behind an admitted pending run', false, [run('a', 'pending', 'holding'), run('b', 'pending', 'queued')], undefined, true],
  ];
  it.each(cases)('%s', (_name, userLocked, runs, next, busy) => {
    expect(nextToAdmit({ userLocked, runs })?.id).toBe(next);
    expect(queueBusy({ userLocked, runs })).toBe(busy);
  });

  it('admits only where nothing holds, exhaustively over two runs', () => {
    for (const first of RUN_STATUSES)
      for (const firstState of STATES)
        for (const locked of [true, false]) {
          const runs = [run('a', first, firstState), run('b', 'pending', 'queued')];
          const next = nextToAdmit({ userLocked: locked, runs })?.id;
          const expected = locked
            ? undefined
            : firstState === 'queued' && first === 'pending'
              ? 'a'
              : HOLDS[first] && firstState === 'holding'
                ? undefined
                : 'b';
          expect([first, firstState, locked, next]).toEqual([first, firstState, locked, expected]);
        }
  });
});

describe('force-execute', () => {
  it('discards a planned holder and waiting runs ahead, and admits the target', () => {
    const plan = planForceExecute(
      {
        userLocked: false,
        runs: [run('a', 'planned', 'holding'), run('b', 'pending', 'queued'), run('c', 'pending', 'queued'), run('d', 'pending', 'queued')],
      },
      'c',
    );
    expect(plan).toEqual({
      ok: true,
      ends: [
        { runId: 'a', from: 'planned', to: 'discarded' },
        { runId: 'b', from: 'pending', to: 'discarded' },
      ],
    });
  });

  it.each(RUN_STATUSES.filter((status) => HOLDS[status]))('ends a holder that is %s by discard, else cancel', (status) => {
    const plan = planForceExecute({ userLocked: false, runs: [run('a', status, 'holding'), run('b', 'pending', 'queued')] }, 'b');
    const subject = { status, planOnly: false };
    const expected = runActionTarget('discard', subject) ?? runActionTarget('cancel', subject);
    expect(plan).toEqual({ ok: true, ends: [{ runId: 'a', from: status, to: expected }] });
  });

  it('leaves released runs, plan-only runs and runs behind the target alone', () => {
    const plan = planForceExecute(
      {
        userLocked: false,
        runs: [run('a', 'applied', 'holding'), run('p', 'planning', null), run('b', 'pending', 'queued'), run('c', 'pending', 'queued')],
      },
      'b',
    );
    expect(plan).toEqual({ ok: true, ends: [] });
  });

  it.each([
    ['a run that is not pending', [run('a', 'planned', 'holding')], 'a', 'not-pending'],
    ['an admitted run', [run('a', 'pending', 'holding')], 'a', 'not-queued'],
    ['a plan-only run', [run('a', 'pending', null)], 'a', 'not-queued'],
    ['a run that is gone', [], 'a', 'not-pending'],
  ] as const)('refuses %s', (_name, runs, target, reason) => {
    expect(planForceExecute({ userLocked: false, runs: [...runs] }, target)).toMatchObject({ ok: false, reason });
  });

  it('refuses on a workspace a person locked', () => {
    expect(planForceExecute({ userLocked: true, runs: [run('a', 'pending', 'queued')] }, 'a')).toMatchObject({
      ok: false,
      reason: 'user-locked',
    });
  });
});

describe('force-cancel', () => {
  it('is available a cool-off after the cancel, and never before one', () => {
    expect(forceCancelAvailableAt({})).toBeNull();
    expect(forceCancelAvailableAt({ 'canceled-at': 'not a time' })).toBeNull();
    const at = forceCancelAvailableAt({ 'canceled-at': '2026-11-26T10:00:00.000Z' });
    expect(at).toBe(new Date(Date.parse('2026-11-26T10:00:00.000Z') + FORCE_CANCEL_COOL_OFF_MS).toISOString());
    expect(FORCE_CANCEL_COOL_OFF_MS).toBe(3_600_000);
  });

  it.each(RUN_STATUSES)('a %s run is never force-cancelable here (a cancel ends it at once)', (status) => {
    expect(isForceCancelable({ status, statusTimestamps: {} })).toBe(false);
    if (status === 'canceled') expect(isForceCancelable({ status, statusTimestamps: { 'canceled-at': 'x' } })).toBe(false);
  });
});

describe('locks', () => {
  const team: LockOwner = { kind: 'teams', id: 'team-a' };
  const otherTeam: LockOwner = { kind: 'teams', id: 'team-b' };
  const user: LockOwner = { kind: 'users', id: 'user-a' };
  const free = { owner: null, holderRunId: null };
  const held = { owner: null, holderRunId: 'run-1' };

  it.each([
    ['a free workspace', free, true],
    ['one a run holds', held, false],
    ['one a team locked', { owner: team, holderRunId: null }, false],
    ['one a user locked while a run holds it', { owner: user, holderRunId: 'run-1' }, false],
  ] as const)('lock of %s: %s', (_name, state, ok) => {
    expect(decideLock(state).ok).toBe(ok);
  });

  // [state, caller, force, ok, lockedBy, detail contains]
  const unlocks: [
    string,
    { owner: LockOwner | null; holderRunId: string | null },
    LockOwner,
    boolean,
    boolean,
    string | undefined,
    string,
  ][] = [
    ['a free workspace', free, team, false, false, undefined, 'already unlocked'],
    ['a free workspace, forced', free, team, true, false, undefined, 'already unlocked'],
    ['a run lock', held, team, false, false, 'Run', 'is locked by Run run-1'],
    ['a run lock, forced', held, team, true, false, 'Run', 'is locked by Run run-1'],
    ['its own lock', { owner: team, holderRunId: null }, team, false, true, undefined, ''],
    ["another team's lock", { owner: otherTeam, holderRunId: null }, team, false, false, 'Team', 'is locked by Team team-b'],
    ["another team's lock, forced", { owner: otherTeam, holderRunId: null }, team, true, true, undefined, ''],
    ["a user's lock", { owner: user, holderRunId: null }, team, false, false, 'User', 'is locked by User user-a'],
    [
      "a user's lock, by a user of the same id as a team",
      { owner: { kind: 'users', id: 'team-a' }, holderRunId: null },
      team,
      false,
      false,
      'User',
      'User',
    ],
    ["a user's lock while a run holds, by the user", { owner: user, holderRunId: 'run-1' }, user, false, true, undefined, ''],
  ];
  it.each(unlocks)('unlock of %s', (_name, state, caller, force, ok, by, detail) => {
    const decision = decideUnlock(state, caller, force);
    expect(decision.ok).toBe(ok);
    if (!decision.ok) {
      expect(decision.lockedBy).toBe(by);
      expect(decision.detail).toContain(detail);
    }
  });

  it('shows a person before the run as locked-by', () => {
    expect(lockedBy(free)).toBeNull();
    expect(lockedBy(held)).toEqual({ type: 'runs', id: 'run-1' });
    expect(lockedBy({ owner: team, holderRunId: 'run-1' })).toEqual({ type: 'teams', id: 'team-a' });
    expect(lockedBy({ owner: user, holderRunId: null })).toEqual({ type: 'users', id: 'user-a' });
  });
});

describe('waitingFor: what a run waiting in the queue waits for', () => {
  const holder: QueueHolder = {
    id: 'run-holder',
    status: 'planning',
    since: '2026-11-28T10:00:00.000Z',
    createdBy: 'user-api-team-a',
    message: 'main',
  };
  const lock = { kind: 'teams' as const, id: 'team-a', reason: 'maintenance' };
  const view = (more: Partial<QueueView>): QueueView => ({ lock: null, holder: null, waitingRunIds: ['run-1', 'run-2', 'run-3'], ...more });

  it.each<[string, string, QueueView, ReturnType<typeof waitingFor>]>([
    ['first behind the holder', 'run-1', view({ holder }), { position: 1, run: holder, lock: null }],
    ['third behind the holder', 'run-3', view({ holder }), { position: 3, run: holder, lock: null }],
    ['first on a locked workspace nobody runs on', 'run-1', view({ lock }), { position: 0, run: null, lock }],
    ['second on a locked workspace with a holder', 'run-2', view({ lock, holder }), { position: 2, run: holder, lock }],
    ['first where nothing holds (about to be admitted)', 'run-1', view({}), { position: 0, run: null, lock: null }],
    ['a run that does not wait (the holder itself, or one that ended)', 'run-holder', view({ holder }), null],
  ])('%s', (_label, runId, queue, expected) => {
    expect(waitingFor(runId, queue)).toEqual(expected);
  });
});

describe('holdingSince: when the holder began to hold its workspace', () => {
  it.each<[string, Record<string, string>, string]>([
    ['not moved yet: its creation', {}, '2026-11-28T09:00:00.000Z'],
    ['created in pre_plan', { 'pre-plan-running-at': '2026-11-28T09:00:00.100Z' }, '2026-11-28T09:00:00.100Z'],
    [
      'admitted later, then moved on: its first move',
      { 'planning-at': '2026-11-28T10:05:00.000Z', 'pre-plan-running-at': '2026-11-28T10:00:00.000Z' },
      '2026-11-28T10:00:00.000Z',
    ],
  ])('%s', (_label, timestamps, expected) => {
    expect(holdingSince(timestamps, '2026-11-28T09:00:00.000Z')).toBe(expected);
  });
});
