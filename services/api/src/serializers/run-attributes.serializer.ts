import { resolveRunOptions, type RunOptions } from '@runtasks/shared/domain';
import { actorUsername, parseActor } from '../auth/actor.ts';
import { timestamp, toOne, type Instant, type Relationship, type Resource } from '../http/jsonapi.ts';

/** What the run attributes below need: any stored run, or one just created. */
export interface RunAttributeSource {
  options: RunOptions;
  createdAt: Instant;
  statusTimestamps: Record<string, string>;
  createdBy?: string | null;
  confirmedBy?: string | null;
}

/**
 * HCP's run attributes beyond the engine's: the creation options with HCP's defaults, and the status
 * timestamps with `plan-queueable-at`. A run can be queued for planning from its creation (the moment
 * HCP records), so that is its `created-at`, derived rather than stored, and every run has it.
 */
export function runOptionAttributes(run: RunAttributeSource): Record<string, unknown> {
  const options = resolveRunOptions(run.options);
  return {
    'status-timestamps': { 'plan-queueable-at': timestamp(run.createdAt), ...run.statusTimestamps },
    source: options.source,
    refresh: options.refresh,
    'refresh-only': options.refreshOnly,
    'allow-empty-apply': options.allowEmptyApply,
    'save-plan': options.savePlan,
    'allow-config-generation': options.allowConfigGeneration,
    'debugging-mode': options.debuggingMode,
    'terraform-version': options.terraformVersion,
    'target-addrs': options.targetAddrs,
    'replace-addrs': options.replaceAddrs,
    variables: options.variables.map(({ key, value }) => ({ key, value })),
    'position-in-queue': 0,
  };
}

/** A stored actor id as a `users` relationship; null when nobody is recorded (or only a value from before actors were). */
const userRelationship = (userId: string | null | undefined): Relationship => toOne('users', parseActor(userId) ? (userId ?? null) : null);

export function runActorRelationships(run: RunAttributeSource): Record<string, Relationship> {
  return { 'created-by': userRelationship(run.createdBy), 'confirmed-by': userRelationship(run.confirmedBy) };
}

/** The service user behind an actor id (`include=created_by`), or null when the id names none. */
export function serializeActorUser(userId: string | null | undefined): Resource | null {
  const actor = parseActor(userId);
  // A person is included as the users routes show them (routes/actor-includes.ts), not as a service user.
  if (!actor || actor.kind === 'user' || !userId) return null;
  return {
    id: userId,
    type: 'users',
    attributes: { username: actorUsername(actor), 'is-service-account': true, 'avatar-url': null, 'v2-only': true },
  };
}
