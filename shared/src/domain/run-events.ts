import type { RunAction } from './run-transitions.ts';

/**
 * What a run event records. HCP documents only `commented` (a comment on the run); the others name
 * the action the way HCP's run states and go-tfe's run actions do: the run was created, confirmed
 * (applied by a person), discarded, canceled or force-canceled, a task stage was overridden, another
 * run was force-executed past it, or a pipeline reported the plan or apply of a local run.
 */
export const RUN_EVENT_ACTIONS = [
  'created',
  'commented',
  'confirmed',
  'discarded',
  'canceled',
  'force_canceled',
  'force_executed',
  'overridden',
  'plan_reported',
  'plan_errored',
  'apply_reported',
  'apply_errored',
] as const;
export type RunEventAction = (typeof RUN_EVENT_ACTIONS)[number];

/** The event a run action records: apply is a confirmation, as HCP's confirmed-by says. */
export const RUN_ACTION_EVENTS: Record<RunAction, RunEventAction> = { apply: 'confirmed', discard: 'discarded', cancel: 'canceled' };

/** Who acted and what they said: the principal's user id, and the comment given with the action. */
export interface ActedBy {
  /** The acting principal's user id (`user-api-<owner id>`, `user-site-admin`, later a person's). */
  actorId: string | null;
  /** The comment given with the action, checked by the caller; empty or absent records none. */
  comment?: string | null;
}
