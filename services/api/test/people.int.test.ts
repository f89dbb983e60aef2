import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { OrganizationMembership, User } from '@runtasks/shared/db';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { api, createTeam, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { issueToken } from '../src/auth/tokens.ts';
import { createUser } from '../src/services/users.service.ts';

/**
 * The people routes in HCP's shapes (go-tfe v1.90.0's Users, OrganizationMemberships, TeamMembers and
 * UserTokens): who may call them (others get the missing resource's 404), and bad input (a clear 4xx
 * with a pointer, nothing changed).
 */
describe('people: account, memberships, team members and user tokens', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  /** A site admin person: their organizations have them as first member and owner. */
  let adminPerson: { id: string; token: string; username: string };

  const invite = (email: string, teams: string[] = [], token = acme.organizationToken, organization = acme.organization) =>
    api(h, 'post', `/organizations/${organization}/organization-memberships`, token, {
      data: {
        type: 'organization-memberships',
        attributes: { email },
        ...(teams.length > 0 && { relationships: { teams: { data: teams.map((id) => ({ type: 'teams', id })) } } }),
      },
    });
  const memberships = async () => h.orm.em.fork().count(OrganizationMembership, {});
  /** A token of the invited person (as the site admin gives one: POST /users/:id/authentication-tokens). */
  const tokenOf = async (userId: string) => {
    const res = await api(h, 'post', `/users/${userId}/authentication-tokens`, h.adminToken, { data: { type: '' } });
    expect(res.status).toBe(201);
    return res.body.data.attributes.token as string;
  };

  beforeAll(async () => {
    h = await startHarness({ ops: true });
    acme = await seedOrganization(h, uniqueName('people'));
    other = await seedOrganization(h, uniqueName('people-other'));
    const em = h.orm.em.fork();
    const user = await createUser(em, { email: 'Site.Admin@Example.test', username: 'site-admin-person', isAdmin: true });
    await em.flush();
    adminPerson = {
      id: user.id,
      username: user.username,
      token: (await issueToken(em, h.secrets, { kind: 'user', userId: user.id })).secret,
    };
  });
  afterAll(async () => {
    await h?.close();
  });

  describe('organization memberships', () => {
    it('invites by email (201): the membership, invited, with its teams, the user included; a read with include=user equals it', async () => {
      const t1 = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('t1'));
      const t2 = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('t2'));
      const created = await invite('New.Person@Example.test', [t2, t1]);
      expect(created.status).toBe(201);
      expect(created.body.data).toMatchObject({
        type: 'organization-memberships',
        id: expect.stringMatching(/^ou-/),
        attributes: { status: 'invited', email: 'new.person@example.test' },
        relationships: {
          organization: { data: { type: 'organizations', id: acme.organization } },
          user: { data: { type: 'users', id: expect.stringMatching(/^user-[A-Za-z0-9]{16}$/) } },
        },
      });
      expect(created.body.data.relationships.teams.data.map((team: { id: string }) => team.id)).toEqual([t1, t2].sort());
      expect(created.body.included).toEqual([
        expect.objectContaining({
          type: 'users',
          attributes: expect.objectContaining({ username: 'new-person', 'avatar-url': expect.any(String) }),
        }),
      ]);
      const read = await api(h, 'get', `/organization-memberships/${created.body.data.id}?include=user`, acme.organizationToken);
      expect(read.body).toEqual(created.body);
      const plain = await api(h, 'get', `/organization-memberships/${created.body.data.id}`, acme.organizationToken);
      expect(plain.body.included).toBeUndefined();
      expect(
        expectError(await api(h, 'get', `/organization-memberships/${created.body.data.id}?include=users`, acme.organizationToken), 400)
          .detail,
      ).toContain('include');
    });

    it('refuses a malformed email, a duplicate membership and a team of another organization, changing nothing', async () => {
      const before = await memberships();
      expectError(await invite('not-an-email-address'), 422, '/data/attributes/email');
      await invite('twice@example.test');
      const count = await memberships();
      expect(expectError(await invite('TWICE@example.test'), 422, '/data/attributes/email').detail).toContain('already a member');
      expectError(await invite('fresh@example.test', [other.teamId]), 422, '/data/relationships/teams/data/0/id');
      expect(await h.orm.em.fork().count(User, { email: 'fresh@example.test' })).toBe(0);
      expect(await memberships()).toBe(count);
      expect(count).toBe(before + 1);
      expectError(
        await api(h, 'post', `/organizations/${acme.organization}/organization-memberships`, acme.organizationToken, {
          data: { type: 'users' },
        }),
        422,
      );
    });

    it('lists with filters: status, emails (any of), q, pages', async () => {
      const org = await seedOrganization(h, uniqueName('listing'));
      const emails = ['a@example.test', 'b@example.test', 'c@example.test'];
      for (const email of emails) expect((await invite(email, [], org.organizationToken, org.organization)).status).toBe(201);
      const list = (query: string) =>
        api(h, 'get', `/organizations/${org.organization}/organization-memberships${query}`, org.organizationToken);
      const all = await list('');
      expect(all.body.data.map((m: { attributes: { email: string } }) => m.attributes.email)).toEqual(emails);
      expect(all.body.meta.pagination['total-count']).toBe(3);
      expect((await list('?filter[email]=a@example.test,C@example.test')).body.data).toHaveLength(2);
      expect((await list('?q=b@exa')).body.data.map((m: { attributes: { email: string } }) => m.attributes.email)).toEqual([
        'b@example.test',
      ]);
      expect((await list('?filter[status]=active')).body.data).toEqual([]);
      const far = await list('?page[number]=999');
      expect([far.body.data, far.body.meta.pagination['current-page'], far.body.meta.pagination['total-count']]).toEqual([[], 999, 3]);
      const withUsers = await list('?include=user');
      expect(withUsers.body.included.map((user: { type: string }) => user.type)).toEqual(['users', 'users', 'users']);
      expectError(await list('?filter[email]=foobar'), 422);
      expectError(await list('?filter[status]=gone'), 422);
      expectError(await list('?include=users'), 400);
    });

    it('hides memberships from everyone but owners and the member (404)', async () => {
      const created = await invite(`${uniqueName('hidden')}@example.test`);
      const id = created.body.data.id as string;
      const teamToken = (await api(h, 'post', `/teams/${acme.teamId}/authentication-token`, acme.organizationToken)).body.data.attributes
        .token;
      for (const token of [other.organizationToken, teamToken]) {
        expectNotFound(await api(h, 'get', `/organization-memberships/${id}`, token));
        expectNotFound(await api(h, 'delete', `/organization-memberships/${id}`, token));
        expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/organization-memberships`, token));
      }
      expectNotFound(await api(h, 'get', '/organization-memberships/ou-doesnotexist000000', acme.organizationToken));
      const member = await tokenOf(created.body.data.relationships.user.data.id);
      expect((await api(h, 'get', `/organization-memberships/${id}`, member)).status).toBe(200);
      expectNotFound(await api(h, 'delete', `/organization-memberships/${id}`, member));
      const own = await api(h, 'get', '/organization-memberships', member);
      expect(own.body.data.map((m: { id: string }) => m.id)).toEqual([id]);
    });

    it("lets a site-admin person read any organization's memberships, not only their own (go-tfe's Read after Create)", async () => {
      const created = await invite(`${uniqueName('seen')}@example.test`, [], adminPerson.token);
      expect(created.status).toBe(201);
      const read = await api(h, 'get', `/organization-memberships/${created.body.data.id}?include=user`, adminPerson.token);
      expect(read.status).toBe(200);
      expect(read.body).toEqual(created.body);
      expectNotFound(await api(h, 'get', '/organization-memberships/ou-doesnotexist000000', adminPerson.token));
    });

    it('removes a member (204): their token no longer reaches the organization, and their run-page sessions end', async () => {
      const created = await invite(`${uniqueName('leaving')}@example.test`);
      const token = await tokenOf(created.body.data.relationships.user.data.id);
      expect((await api(h, 'post', `/organization-memberships/${created.body.data.id}/actions/accept`, token)).status).toBe(200);
      expect((await api(h, 'get', `/organizations/${acme.organization}`, token)).status).toBe(200);
      const tokenId = (
        await h.orm.em
          .fork()
          .execute<{ id: string }[]>(`select id from api_tokens where user_id = ?`, [created.body.data.relationships.user.data.id])
      )[0]?.id;
      await h.orm.em
        .fork()
        .execute(`insert into page_sessions (id_hash, token_id, created_at, expires_at) values (?, ?, now(), now() + interval '1 hour')`, [
          'f'.repeat(64),
          tokenId,
        ]);
      expect((await api(h, 'delete', `/organization-memberships/${created.body.data.id}`, acme.organizationToken)).status).toBe(204);
      expectNotFound(await api(h, 'get', `/organizations/${acme.organization}`, token));
      expect(await h.orm.em.fork().execute(`select 1 from page_sessions where token_id = ?`, [tokenId])).toEqual([]);
      expectNotFound(await api(h, 'get', `/organization-memberships/${created.body.data.id}`, acme.organizationToken));
    });
  });

  describe('account and users', () => {
    it("shows a person's own account with its email and permissions, and a service user for other tokens", async () => {
      const mine = await api(h, 'get', '/account/details', adminPerson.token);
      expect(mine.body.data).toMatchObject({
        id: adminPerson.id,
        type: 'users',
        attributes: {
          username: 'site-admin-person',
          email: 'site.admin@example.test',
          'is-service-account': false,
          'two-factor': { enabled: false, verified: false },
          permissions: expect.objectContaining({ 'can-create-organizations': true }),
        },
      });
      const service = await api(h, 'get', '/account/details', acme.organizationToken);
      expect(service.body.data).toMatchObject({
        type: 'users',
        attributes: { 'is-service-account': true, username: expect.stringMatching(/^api-org-/) },
      });
    });

    it('updates the username and email (an empty update changes nothing); bad or taken values are 422s with pointers', async () => {
      const em = h.orm.em.fork();
      const user = await createUser(em, { email: `${uniqueName('upd')}@example.test` });
      await em.flush();
      const token = (await issueToken(em, h.secrets, { kind: 'user', userId: user.id })).secret;
      const before = (await api(h, 'get', '/account/details', token)).body;
      expect((await api(h, 'patch', '/account/update', token, { data: { type: 'users' } })).status).toBe(200);
      expect((await api(h, 'get', '/account/details', token)).body).toEqual(before);
      const renamed = await api(h, 'patch', '/account/update', token, {
        data: { type: 'users', attributes: { username: 'NewTestUsername', email: 'New@Example.test' } },
      });
      expect(renamed.body.data.attributes).toMatchObject({ username: 'NewTestUsername', email: 'new@example.test' });
      expectError(
        await api(h, 'patch', '/account/update', token, { data: { type: 'users', attributes: { email: 'notamailaddress' } } }),
        422,
        '/data/attributes/email',
      );
      expectError(
        await api(h, 'patch', '/account/update', token, { data: { type: 'users', attributes: { username: 'site-admin-person' } } }),
        422,
        '/data/attributes/username',
      );
      expectError(
        await api(h, 'patch', '/account/update', token, { data: { type: 'users', attributes: { email: 'SITE.admin@example.test' } } }),
        422,
        '/data/attributes/email',
      );
      expect((await api(h, 'get', '/account/details', token)).body.data.attributes).toMatchObject({
        username: 'NewTestUsername',
        email: 'new@example.test',
      });
      expectNotFound(
        await api(h, 'patch', '/account/update', acme.organizationToken, { data: { type: 'users', attributes: { username: 'x' } } }),
      );
    });

    it("shows a user's public fields to members of their organizations, everything to themself; 404 to anyone else", async () => {
      const created = await invite(`${uniqueName('seen')}@example.test`);
      const userId = created.body.data.relationships.user.data.id as string;
      const seen = await api(h, 'get', `/users/${userId}`, acme.organizationToken);
      expect(seen.status).toBe(200);
      expect(seen.body.data.attributes.email).toBeUndefined();
      expect((await api(h, 'get', `/users/${userId}`, await tokenOf(userId))).body.data.attributes.email).toMatch(/@example\.test$/);
      expectNotFound(await api(h, 'get', `/users/${userId}`, other.organizationToken));
      expectNotFound(await api(h, 'get', '/users/user-doesnotexist00000', acme.organizationToken));
    });
  });

  describe('organizations created by a person, and team members', () => {
    it('makes the person who creates an organization its first member, active, on the owners team; they add themself to a team by username', async () => {
      const name = uniqueName('mine');
      const created = await api(h, 'post', '/organizations', adminPerson.token, {
        data: { type: 'organizations', attributes: { name, email: 'me@example.test' } },
      });
      expect(created.status).toBe(201);
      const list = await api(
        h,
        'get',
        `/organizations/${name}/organization-memberships?filter[status]=active&include=teams`,
        adminPerson.token,
      );
      expect(list.body.data).toHaveLength(1);
      expect(list.body.included.map((team: { attributes: { name: string } }) => team.attributes.name)).toEqual(['owners']);
      const team = await createTeam(h, name, adminPerson.token, 'devs');
      const add = (body: unknown) => api(h, 'post', `/teams/${team}/relationships/users`, adminPerson.token, body);
      expect((await add({ data: [{ type: 'users', id: adminPerson.username }] })).status).toBe(204);
      const shown = await api(h, 'get', `/teams/${team}?include=users`, adminPerson.token);
      expect(shown.body.data.attributes['users-count']).toBe(1);
      expect(shown.body.data.relationships.users.data).toEqual([{ type: 'users', id: adminPerson.id }]);
      expect(shown.body.included.map((user: { attributes: { username: string } }) => user.attributes.username)).toEqual([
        adminPerson.username,
      ]);
      expect((await api(h, 'get', `/teams/${team}/relationships/users`, adminPerson.token)).body).toEqual({
        data: [{ type: 'users', id: adminPerson.username }],
      });
      expectError(await add({ data: [{ type: 'users', id: 'nobody-here' }] }), 422, '/data/0/id');
      expectError(await add({ data: [] }), 422);
      const removed = await api(h, 'delete', `/teams/${team}/relationships/users`, adminPerson.token, {
        data: [{ type: 'users', id: adminPerson.username }],
      });
      expect(removed.status).toBe(204);
      expect((await api(h, 'get', `/teams/${team}`, adminPerson.token)).body.data.attributes['users-count']).toBe(0);
    });

    it('adds an invited member by membership id (not by username until they accept), and hides teams from non-owners', async () => {
      const team = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('crew'));
      const created = await invite(`${uniqueName('crew')}@example.test`);
      const username = (created.body.included[0] as { attributes: { username: string } }).attributes.username;
      expect(
        expectError(
          await api(h, 'post', `/teams/${team}/relationships/users`, acme.organizationToken, { data: [{ type: 'users', id: username }] }),
          422,
          '/data/0/id',
        ).detail,
      ).toContain('not accepted');
      const body = { data: [{ type: 'organization-memberships', id: created.body.data.id }] };
      expect((await api(h, 'post', `/teams/${team}/relationships/organization-memberships`, acme.organizationToken, body)).status).toBe(
        204,
      );
      const shown = await api(h, 'get', `/teams/${team}?include=organization-memberships`, acme.organizationToken);
      expect(shown.body.included.map((m: { id: string }) => m.id)).toEqual([created.body.data.id]);
      expectNotFound(await api(h, 'post', `/teams/${team}/relationships/organization-memberships`, other.organizationToken, body));
      expectNotFound(await api(h, 'post', `/teams/${other.teamId}/relationships/organization-memberships`, acme.organizationToken, body));
    });
  });

  describe('user tokens', () => {
    it('creates (201, the secret once), lists, reads and revokes a person’s own tokens; created-by is the person', async () => {
      const created = await api(h, 'post', `/users/${adminPerson.id}/authentication-tokens`, adminPerson.token, {
        data: { type: '', attributes: { description: 'laptop', 'expired-at': '2999-01-02T03:04:05Z' } },
      });
      expect(created.status).toBe(201);
      expect(created.body.data.attributes).toMatchObject({
        description: 'laptop',
        'expired-at': '2999-01-02T03:04:05.000Z',
        token: expect.any(String),
      });
      expect(created.body.data.relationships['created-by']).toEqual({ data: { type: 'users', id: adminPerson.id } });
      const read = await api(h, 'get', `/authentication-tokens/${created.body.data.id}`, adminPerson.token);
      expect(read.body.data).toEqual({ ...created.body.data, attributes: { ...created.body.data.attributes, token: null } });
      const list = await api(h, 'get', `/users/${adminPerson.id}/authentication-tokens`, adminPerson.token);
      expect(list.body.data.map((token: { id: string }) => token.id)).toContain(created.body.data.id);
      expect((await api(h, 'get', '/account/details', created.body.data.attributes.token)).body.data.id).toBe(adminPerson.id);
      expect((await api(h, 'delete', `/authentication-tokens/${created.body.data.id}`, adminPerson.token)).status).toBe(204);
      expect((await api(h, 'get', '/account/details', created.body.data.attributes.token)).status).toBe(401);
    });

    it("answers another user's list with an empty list, and hides their tokens and token creation (404)", async () => {
      const created = await invite(`${uniqueName('tok')}@example.test`);
      const userId = created.body.data.relationships.user.data.id as string;
      const token = await tokenOf(userId);
      const tokenId = (await api(h, 'get', `/users/${userId}/authentication-tokens`, token)).body.data[0].id as string;
      expect((await api(h, 'get', `/users/${userId}/authentication-tokens`, acme.organizationToken)).body.data).toEqual([]);
      expectNotFound(await api(h, 'post', `/users/${userId}/authentication-tokens`, acme.organizationToken));
      expectNotFound(await api(h, 'get', `/authentication-tokens/${tokenId}`, acme.organizationToken));
      expectNotFound(await api(h, 'delete', `/authentication-tokens/${tokenId}`, other.organizationToken));
      expectNotFound(await api(h, 'get', '/users/user-doesnotexist00000/authentication-tokens', acme.organizationToken));
      expectError(
        await api(h, 'post', `/users/${userId}/authentication-tokens`, token, {
          data: { type: '', attributes: { 'expired-at': '2000-01-01T00:00:00Z' } },
        }),
        422,
        '/data/attributes/expired-at',
      );
    });
  });
});
