import { runActionTarget } from './run-transitions.ts';
import { FINAL_RUN_STATUSES, RUN_STATUSES, type RunStatus } from './statuses.ts';

/**
 * The workspace run queue, as HCP Terraform has it: one run at a time holds a workspace, in creation
 * order, and the others wait `pending`. Plan-only (speculative) runs are outside the queue: they never
 * wait and never hold. A run's place in the queue is its `queue_state`: `queued` while it waits,
 * `holding` once admitted (for good: a run is admitted once), null for plan-only runs and for runs
 * created before the queue existed.
 */
export const QUEUE_STATES = ['queued', 'holding'] as const;
export type QueueState = (typeof QUEUE_STATES)[number];

/**
 * Statuses in which an admitted run no longer holds its workspace: the final ones, and the post-apply
 * stage (its tasks never block, and the apply is done, so the next run need not wait for them).
 * `planned` and every `*_awaiting_decision` status keep holding, as in HCP, until the run is applied,
 * discarded or canceled. The runs' generated column `holds_workspace`, the unique index's predicate, is
 * computed from this set (run.entity.ts).
 */
export const RELEASED_RUN_STATUSES: ReadonlySet<RunStatus> = new Set<RunStatus>([...FINAL_RUN_STATUSES, 'post_apply_running']);

/** Statuses in which an admitted run holds its workspace. */
export const HOLDING_RUN_STATUSES: readonly RunStatus[] = RUN_STATUSES.filter((status) => !RELEASED_RUN_STATUSES.has(status));

/** What the queue rules need of a run. */
export interface QueuedRun {
  id: string;
  status: RunStatus;
  queueState: QueueState | null;
}

/** Whether the run holds its workspace now. */
export const holdsWorkspace = (run: Pick<QueuedRun, 'status' | 'queueState'>): boolean =>
  run.queueState === 'holding' && !RELEASED_RUN_STATUSES.has(run.status);

/** Whether the run waits in its workspace's queue: nothing of it may start (no stage, no plan). */
export const waitsInQueue = (run: Pick<QueuedRun, 'status' | 'queueState'>): boolean =>
  run.queueState === 'queued' && run.status === 'pending';

/** A run's place at creation: plan-only runs stay out of the queue; another run holds at once only where nothing holds or waits and nobody locked the workspace. */
export function queueStateAtCreation(run: { planOnly: boolean }, workspace: { busy: boolean }): QueueState | null {
  if (run.planOnly) return null;
  return workspace.busy ? 'queued' : 'holding';
}

/** A workspace as the admission rule sees it: whether a person (user or team) locked it, and its runs in creation order. */
export interface QueueSnapshot {
  userLocked: boolean;
  runs: readonly QueuedRun[];
}

/** The run that holds the workspace, if any (at most one: the unique index allows no second). */
export const holderOf = (runs: readonly QueuedRun[]): QueuedRun | undefined => runs.find(holdsWorkspace);

/** The run to admit now, or undefined: the oldest waiting run, where nobody locked the workspace and no run holds it. */
export function nextToAdmit(workspace: QueueSnapshot): QueuedRun | undefined {
  if (workspace.userLocked || holderOf(workspace.runs)) return undefined;
  return workspace.runs.find(waitsInQueue);
}

/** Whether the workspace is busy for a new run: locked, held, or with runs already waiting (which go first). */
export const queueBusy = (workspace: QueueSnapshot): boolean =>
  workspace.userLocked || workspace.runs.some((run) => holdsWorkspace(run) || waitsInQueue(run));

/** What force-execute does to a run ahead: discard it where it may be discarded, else cancel it. */
export type ForceExecuteEnd = { runId: string; from: RunStatus; to: 'discarded' | 'canceled' };

export type ForceExecutePlan =
  { ok: true; ends: ForceExecuteEnd[] } | { ok: false; reason: 'not-pending' | 'not-queued' | 'user-locked' | 'stuck'; detail: string };

/**
 * Force-execute of `targetId` (HCP: a pending run jumps the queue): every run ahead of it (the holder
 * and the older waiting runs) is discarded, or canceled where it cannot be discarded, and the target is
 * admitted. Refused for a run that is not pending, one outside the queue (plan-only: it never waits),
 * on a workspace a person locked, and where a run ahead can be neither discarded nor canceled.
 */
export function planForceExecute(workspace: QueueSnapshot, targetId: string): ForceExecutePlan {
  const index = workspace.runs.findIndex((run) => run.id === targetId);
  const target = workspace.runs[index];
  if (!target || target.status !== 'pending')
    return {
      ok: false,
      reason: 'not-pending',
      detail: `Only a pending run can be force-executed; this one is ${target?.status ?? 'gone'}.`,
    };
  if (target.queueState !== 'queued')
    return {
      ok: false,
      reason: 'not-queued',
      detail: 'This run does not wait in the workspace queue (it holds the workspace already, or is plan-only): it starts on its own.',
    };
  if (workspace.userLocked)
    return { ok: false, reason: 'user-locked', detail: 'The workspace is locked: unlock it before force-executing a run.' };
  const ends: ForceExecuteEnd[] = [];
  for (const run of workspace.runs.slice(0, index)) {
    if (!holdsWorkspace(run) && !waitsInQueue(run)) continue;
    const subject = { status: run.status, planOnly: false };
    const to = runActionTarget('discard', subject) ?? runActionTarget('cancel', subject);
    if (to !== 'discarded' && to !== 'canceled')
      return {
        ok: false,
        reason: 'stuck',
        detail: `The run ${run.id} ahead of this one is ${run.status} and can be neither discarded nor canceled.`,
      };
    ends.push({ runId: run.id, from: run.status, to });
  }
  return { ok: true, ends };
}

/** How long after a cancel HCP offers force-cancel (its cool-off period). */
export const FORCE_CANCEL_COOL_OFF_MS = 60 * 60 * 1000;

/**
 * `force-cancel-available-at`: a cool-off after the run's cancel was requested (its `canceled-at`), or
 * null where it was never canceled. Here a cancel takes effect at once, so by then the run has ended.
 */
export function forceCancelAvailableAt(statusTimestamps: Readonly<Record<string, string>>): string | null {
  const canceledAt = statusTimestamps['canceled-at'];
  if (canceledAt === undefined) return null;
  const at = Date.parse(canceledAt);
  return Number.isNaN(at) ? null : new Date(at + FORCE_CANCEL_COOL_OFF_MS).toISOString();
}

/**
 * `is-force-cancelable`: HCP offers force-cancel for a run whose cancel was requested and has not taken
 * effect after the cool-off. A cancel here ends the run in the same transaction, so no run is ever in
 * that state: always false, and `force-cancel` answers 409 (nothing is left to force).
 */
export const isForceCancelable = (run: { status: RunStatus; statusTimestamps: Readonly<Record<string, string>> }): boolean =>
  !RELEASED_RUN_STATUSES.has(run.status) && 'canceled-at' in run.statusTimestamps;

/** Who locked a workspace by hand: a team (a team token, or the organization token acting for its owners team) or a user (the site admin). */
export interface LockOwner {
  kind: 'teams' | 'users';
  id: string;
}

/** What holds a workspace now, as locking sees it: a person's lock and/or the run holding it. */
export interface LockState {
  owner: LockOwner | null;
  holderRunId: string | null;
}

export type LockDecision = { ok: true } | { ok: false; detail: string; lockedBy?: 'Run' | 'Team' | 'User' };

const ownerName = (owner: LockOwner): 'Team' | 'User' => (owner.kind === 'teams' ? 'Team' : 'User');

/** `actions/lock`: only a workspace that nobody (no person, no run) holds can be locked. */
export function decideLock(state: LockState): LockDecision {
  if (state.owner || state.holderRunId) return { ok: false, detail: 'The workspace is already locked.' };
  return { ok: true };
}

/**
 * `actions/unlock` (by `caller`) and `actions/force-unlock` (`force`): only a person's lock can be
 * taken off; the one who locked it may unlock it, and force-unlock takes off anyone's. A workspace held
 * by a run is unlocked by the run finishing (or by canceling or discarding it), never by hand.
 */
export function decideUnlock(state: LockState, caller: LockOwner, force: boolean): LockDecision {
  if (!state.owner) {
    if (state.holderRunId)
      return { ok: false, lockedBy: 'Run', detail: `Unable to unlock workspace. The workspace is locked by Run ${state.holderRunId}.` };
    return { ok: false, detail: 'The workspace is already unlocked.' };
  }
  if (!force && (state.owner.kind !== caller.kind || state.owner.id !== caller.id)) {
    const name = ownerName(state.owner);
    return { ok: false, lockedBy: name, detail: `Unable to unlock workspace. The workspace is locked by ${name} ${state.owner.id}.` };
  }
  return { ok: true };
}

/** `locked` and `locked-by` as a workspace shows them: a person's lock first, else the run holding it. */
export function lockedBy(state: LockState): { type: 'teams' | 'users' | 'runs'; id: string } | null {
  if (state.owner) return { type: state.owner.kind, id: state.owner.id };
  return state.holderRunId ? { type: 'runs', id: state.holderRunId } : null;
}

/** The run that holds a workspace, as a run waiting behind it tells of it. */
export interface QueueHolder {
  id: string;
  status: RunStatus;
  /** When it began to hold the workspace (`holdingSince`). */
  since: string;
  /** Who created it: a user id (api's auth/actor.ts), or null where none is recorded. */
  createdBy: string | null;
  message: string;
}

/** A workspace's queue as a waiting run sees it: a person's lock, the holder, and the waiting runs' ids in order. */
export interface QueueView {
  lock: (LockOwner & { reason: string | null }) | null;
  holder: QueueHolder | null;
  waitingRunIds: readonly string[];
}

/**
 * What a run waiting in its workspace's queue waits for: how many runs go first (the holder and the
 * runs that waited longer), the run that holds the workspace, and a person's lock. Null for a run that
 * does not wait (it holds the workspace, has ended, or is outside the queue).
 */
export interface WaitingFor {
  position: number;
  run: QueueHolder | null;
  lock: QueueView['lock'];
}

export function waitingFor(runId: string, view: QueueView): WaitingFor | null {
  const ahead = view.waitingRunIds.indexOf(runId);
  if (ahead < 0) return null;
  return { position: ahead + (view.holder ? 1 : 0), run: view.holder, lock: view.lock };
}

/**
 * When a run began to hold its workspace: its first status change after its creation (an admitted run is
 * moved on within moments of its admission), or its creation where it has not moved yet. Status
 * timestamps are ISO strings in UTC, so the earliest sorts first.
 */
export function holdingSince(statusTimestamps: Readonly<Record<string, string>>, createdAt: string): string {
  const moved = Object.values(statusTimestamps).sort();
  return moved[0] ?? createdAt;
}
