import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId } from '@runtasks/shared/domain';
import { Organization, Team } from '@runtasks/shared/db';
import { uniqueName } from '../../../test/support/assertions.ts';
import { seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { SITE_ADMIN_USER_ID } from '../src/auth/actor.ts';
import { actorNames } from '../src/services/actor-names.service.ts';
import { createUser } from '../src/services/users.service.ts';

/** The names run pages and their events give actors: people by username, service users by their owner. */
describe('actor names', () => {
  let h: Harness;
  let f: Fixture;

  beforeAll(async () => {
    h = await startHarness();
    f = await seedOrganization(h, uniqueName('actors'));
  });
  afterAll(async () => {
    await h?.close();
  });

  it('names a person by username, teams and owners by name, and says when one is gone; ids it cannot parse stay as they are', async () => {
    const em = h.orm.em.fork();
    const person = await createUser(em, { email: `${uniqueName('person')}@example.test`, username: uniqueName('ada') });
    await em.flush();
    const organization = await em.findOneOrFail(Organization, { name: f.organization });
    const team = await em.findOneOrFail(Team, f.teamId);
    const gone = { person: newId('user'), team: newId('team'), organization: newId('organization') };
    const ids = {
      person: person.id,
      team: `user-api-${team.id}`,
      owners: `user-api-${organization.id}`,
      admin: SITE_ADMIN_USER_ID,
      gonePerson: gone.person,
      goneTeam: `user-api-${gone.team}`,
      goneOrganization: `user-api-${gone.organization}`,
      legacy: 'someone-from-before',
    };
    const names = await actorNames(em, [...Object.values(ids), null, person.id]);
    expect(Object.fromEntries(Object.entries(ids).map(([key, id]) => [key, names.get(id)]))).toEqual({
      person: person.username,
      team: `team ${team.name} of ${f.organization}`,
      owners: `owners of ${f.organization}`,
      admin: 'site admin',
      gonePerson: 'a deleted user',
      goneTeam: 'a deleted team',
      goneOrganization: 'a deleted organization',
      legacy: 'someone-from-before',
    });
    expect(names.size).toBe(Object.keys(ids).length);
    expect((await actorNames(em, [null])).size).toBe(0);
  });
});
