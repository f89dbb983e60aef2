import type { EntityManager } from '@mikro-orm/postgresql';
import { nativePool, prepared, runPrepared } from '@runtasks/shared/db';
import { parseActor } from '../auth/actor.ts';

/** The names of the teams, organizations and people named, in one statement. */
const ACTOR_NAMES = prepared(
  'actor-names',
  `select 'team' as kind, t.id, t.name, o.name as organization
     from teams t join organizations o on o.id = t.organization_id
    where t.id = any($1::text[])
   union all
   select 'organization', o.id, o.name, null from organizations o where o.id = any($2::text[])
   union all
   select 'user', u.id, u.username, null from users u where u.id = any($3::text[])`,
);

interface NameRow {
  kind: 'team' | 'organization' | 'user';
  id: string;
  name: string;
  organization: string | null;
}

/**
 * Who an actor is, in words for a page: "site admin", "owners of acme", "team platform of acme", a
 * person's username; the id itself where it names nobody known. One query at most, whatever the
 * number of actors.
 */
export async function actorNames(em: EntityManager, actorIds: Iterable<string | null>): Promise<Map<string, string>> {
  const ids = [...new Set([...actorIds].filter((id): id is string => id !== null))];
  const actors = ids.map((id) => ({ id, actor: parseActor(id) }));
  const teamIds = actors.flatMap(({ actor }) => (actor?.kind === 'team' ? [actor.teamId] : []));
  const organizationIds = actors.flatMap(({ actor }) => (actor?.kind === 'organization' ? [actor.organizationId] : []));
  const userIds = actors.flatMap(({ actor }) => (actor?.kind === 'user' ? [actor.userId] : []));
  const rows =
    teamIds.length + organizationIds.length + userIds.length === 0
      ? []
      : await runPrepared<NameRow>(await nativePool(em), ACTOR_NAMES, [teamIds, organizationIds, userIds]);
  const byId = new Map(rows.map((row) => [`${row.kind}:${row.id}`, row]));
  const nameOf = (kind: NameRow['kind'], id: string) => byId.get(`${kind}:${id}`);
  return new Map(
    actors.map(({ id, actor }) => {
      if (actor?.kind === 'admin') return [id, 'site admin'];
      if (actor?.kind === 'team') {
        const team = nameOf('team', actor.teamId);
        return [id, team ? `team ${team.name} of ${team.organization ?? ''}` : 'a deleted team'];
      }
      if (actor?.kind === 'organization') {
        const organization = nameOf('organization', actor.organizationId);
        return [id, organization ? `owners of ${organization.name}` : 'a deleted organization'];
      }
      if (actor?.kind === 'user') return [id, nameOf('user', actor.userId)?.name ?? 'a deleted user'];
      if (actor?.kind === 'pipeline') return [id, `a pipeline (trust rule ${actor.ruleId})`];
      return [id, id];
    }),
  );
}
