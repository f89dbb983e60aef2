import { selfLink, timestamp, toOne, type Resource } from '../http/jsonapi.ts';
import type { RunEventView } from '../services/run-event.service.ts';
import { parseActor } from '../auth/actor.ts';

/** What an event's action says in words, where the engine stored no sentence of its own. */
const ACTION_WORDS: Record<string, string> = {
  created: 'Run created',
  commented: 'Comment added',
  confirmed: 'Run confirmed',
  discarded: 'Run discarded',
  canceled: 'Run canceled',
  force_canceled: 'Run force-canceled',
  force_executed: 'Run force-executed',
  overridden: 'Task stage overridden',
  plan_reported: 'Plan reported by a pipeline',
  plan_errored: 'Plan reported as errored by a pipeline',
  apply_reported: 'Apply reported by a pipeline',
  apply_errored: 'Apply reported as errored by a pipeline',
};

/**
 * HCP's `run-events` document (undocumented; go-tfe's RunEvent): the action, when, a sentence, and
 * who (`actor`, a user) and what they said (`comment`). Both relationships always carry their linkage,
 * as HCP's do, so a client without `include` still sees who acted.
 */
export function serializeRunEvent(event: RunEventView): Resource {
  return {
    id: event.id,
    type: 'run-events',
    attributes: {
      action: event.action,
      'created-at': timestamp(event.createdAt),
      description: event.description ?? ACTION_WORDS[event.action] ?? event.action,
    },
    relationships: {
      actor: toOne('users', parseActor(event.actorId) ? event.actorId : null),
      comment: toOne('comments', event.comment?.id ?? null),
      run: toOne('runs', event.runId),
    },
    links: selfLink(`/run-events/${event.id}`),
  };
}
