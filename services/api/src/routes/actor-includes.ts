import { User } from '@runtasks/shared/db';
import { parseActor } from '../auth/actor.ts';
import type { ApiContext } from '../context.ts';
import type { Resource } from '../http/jsonapi.ts';
import { serializeActorUser } from '../serializers/run-attributes.serializer.ts';
import { serializeUser } from '../serializers/user.serializer.ts';

/**
 * The `users` resources that stored actor ids name, for `include=actor` and `include=created_by`: a
 * service user as derived from its id, a person as the users routes show them (public fields, as HCP
 * includes another user; the caller's own account with its email). People are read in one query; a
 * person since deleted is left out (the relationship keeps naming their id).
 */
export async function includedActors(ctx: ApiContext, actorIds: Iterable<string | null | undefined>): Promise<Resource[]> {
  const ids = [...new Set([...actorIds].filter((id): id is string => typeof id === 'string'))];
  const personIds = ids.filter((id) => parseActor(id)?.kind === 'user');
  const people =
    personIds.length === 0
      ? new Map<string, User>()
      : new Map((await ctx.state.em.find(User, { id: { $in: personIds } })).map((user) => [user.id, user]));
  const principal = ctx.state.principal;
  const callerId = principal.kind === 'user' || principal.kind === 'admin' ? principal.userId : undefined;
  return ids.flatMap((id) => {
    if (parseActor(id)?.kind !== 'user') return serializeActorUser(id) ?? [];
    const user = people.get(id);
    return user ? [serializeUser(user, user.id === callerId)] : [];
  });
}
