import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool, OrganizationMembership, TeamMembership, User } from '@runtasks/shared/db';
import { expectError, expectNotFound, uniqueName, type Response } from '../../../test/support/assertions.ts';
import { createTeam, createWorkspace, grantWorkspace, api, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startTestIssuer, type TestIssuer } from '../../../test/support/oidc-issuer.ts';

interface TrailEvent {
  auth: { accessor_id: string | null; description: string | null; type: string; organization_id: string };
  resource: { id: string; type: string; action: string; meta: Record<string, unknown> | null };
  request: { id: string | null; client_address: string | null };
}

/**
 * People in the records, with the default rate limit (ops): a person's run events include them in
 * HCP's `users` shape; the audit trail names them as HCP's does (accessor id, username, `Client`); an
 * invitation grants nothing until the invited person accepts it; and bad input about people (an
 * unknown user, a duplicate membership, a malformed email) or a CI token no trust rule accepts is a
 * clear 4xx that changes nothing and is recorded in the trail.
 */
describe('people in run events and the audit trail; invitations; refusals recorded', () => {
  let h: Harness;
  let issuer: TestIssuer;
  let acme: Fixture;
  let acmeId: string;
  const audience = 'https://runtasks.example.test';

  /** A client as a real one behaves under the rate limit: on 429 it waits what Retry-After says and sends again. */
  const call = (method: 'get' | 'post' | 'patch' | 'delete', path: string, token?: string, body?: unknown): Promise<Response> =>
    api(h, method, path, token, body);
  const sql = async <T>(text: string, values: unknown[] = []): Promise<T[]> =>
    (await (await nativePool(h.orm.em)).query(text, values)).rows as T[];
  const trail = async (organizationToken = acme.organizationToken): Promise<TrailEvent[]> => {
    const res = await call('get', '/organization/audit-trail', organizationToken);
    expect(res.status).toBe(200);
    return res.body.data as TrailEvent[];
  };
  const invite = (email: string, teams: string[] = [], fixture = acme) =>
    call('post', `/organizations/${fixture.organization}/organization-memberships`, fixture.organizationToken, {
      data: {
        type: 'organization-memberships',
        attributes: { email },
        ...(teams.length > 0 && { relationships: { teams: { data: teams.map((id) => ({ type: 'teams', id })) } } }),
      },
    });
  /** The invited person's first token, as the site admin gives one. */
  const tokenOf = async (userId: string): Promise<string> => {
    const res = await call('post', `/users/${userId}/authentication-tokens`, h.adminToken, { data: { type: '' } });
    expect(res.status).toBe(201);
    return res.body.data.attributes.token as string;
  };
  /** A person invited onto `teams` of acme, with a token; their membership not accepted yet. */
  const invitedPerson = async (label: string, teams: string[] = []) => {
    const created = await invite(`${uniqueName(label)}@example.test`, teams);
    expect(created.status).toBe(201);
    const userId = created.body.data.relationships.user.data.id as string;
    return {
      userId,
      membershipId: created.body.data.id as string,
      username: created.body.included[0].attributes.username as string,
      token: await tokenOf(userId),
    };
  };
  const accept = (membershipId: string, token: string) => call('post', `/organization-memberships/${membershipId}/actions/accept`, token);
  const counts = async () => {
    const em = h.orm.em.fork();
    return {
      users: await em.count(User, {}),
      memberships: await em.count(OrganizationMembership, {}),
      teamMembers: await em.count(TeamMembership, {}),
    };
  };

  beforeAll(async () => {
    issuer = await startTestIssuer();
    h = await startHarness({ ops: true, env: { CI_TOKEN_ISSUERS: issuer.url } });
    acme = await seedOrganization(h, uniqueName('records'));
    [{ id: acmeId }] = await sql<{ id: string }>(`select id from organizations where name = $1`, [acme.organization]);
  }, 30_000);
  afterAll(async () => {
    await h?.close();
    await issuer?.close();
  });

  describe('invitations', () => {
    it('grant nothing until the invited person accepts; only they can accept, once, and their token reaches the organization at once', async () => {
      const crew = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('crew'));
      await grantWorkspace(h, acme.organizationToken, crew, acme.workspaceId, { access: 'read' });
      const person = await invitedPerson('invitee', [crew]);
      const other = await invitedPerson('bystander');

      // Invited: the person reads their own invitation, and nothing of the organization, however often their token is used.
      for (let i = 0; i < 3; i += 1) {
        expectNotFound(await call('get', `/organizations/${acme.organization}`, person.token));
        expectNotFound(await call('get', `/workspaces/${acme.workspaceId}`, person.token));
      }
      const own = await call('get', `/organization-memberships/${person.membershipId}`, person.token);
      expect(own.body.data.attributes.status).toBe('invited');
      const [stored] = await sql<{ status: string }>(`select status from organization_memberships where id = $1`, [person.membershipId]);
      expect(stored?.status).toBe('invited');

      // Nobody accepts for them: not an owner, not another person, not the site admin's token.
      for (const token of [acme.organizationToken, other.token, h.adminToken]) expectNotFound(await accept(person.membershipId, token));
      expectNotFound(await accept('ou-doesnotexist000000', person.token));
      expectError(await call('post', `/organization-memberships/${person.membershipId}/actions/accept`, person.token, [1]), 422);
      expect(
        (await sql<{ status: string }>(`select status from organization_memberships where id = $1`, [person.membershipId]))[0]?.status,
      ).toBe('invited');

      const accepted = await accept(person.membershipId, person.token);
      expect(accepted.status).toBe(200);
      expect(accepted.body.data).toMatchObject({ id: person.membershipId, attributes: { status: 'active' } });
      // The principal this process remembered for the token is forgotten: the very next request reaches the organization.
      expect((await call('get', `/organizations/${acme.organization}`, person.token)).status).toBe(200);
      expect((await call('get', `/workspaces/${acme.workspaceId}`, person.token)).status).toBe(200);
      // Accepting again changes nothing, and is recorded once.
      expect((await accept(person.membershipId, person.token)).body.data.attributes.status).toBe('active');
      const accepts = (await trail()).filter((event) => event.resource.action === 'accept' && event.resource.id === person.membershipId);
      expect(accepts).toHaveLength(1);
      // The bystander, still invited, reaches nothing.
      expectNotFound(await call('get', `/workspaces/${acme.workspaceId}`, other.token));
    });

    it('can be added to teams by username only once accepted', async () => {
      const team = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('later'));
      const person = await invitedPerson('later');
      const add = () =>
        call('post', `/teams/${team}/relationships/users`, acme.organizationToken, { data: [{ type: 'users', id: person.username }] });
      expectError(await add(), 422, '/data/0/id');
      expect((await accept(person.membershipId, person.token)).status).toBe(200);
      expect((await add()).status).toBe(204);
    });
  });

  describe('a person in run events and the audit trail', () => {
    it("includes the person who acted as a users resource in HCP's shape, and the trail names them by id and username", async () => {
      const writers = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('writers'));
      await grantWorkspace(h, acme.organizationToken, writers, acme.workspaceId, { access: 'write' });
      const person = await invitedPerson('runner', [writers]);
      expect((await accept(person.membershipId, person.token)).status).toBe(200);

      const created = await call('post', '/runs', person.token, {
        data: { type: 'runs', attributes: {}, relationships: { workspace: { data: { type: 'workspaces', id: acme.workspaceId } } } },
      });
      expect(created.status).toBe(201);
      const runId = created.body.data.id as string;
      expect(created.body.data.relationships['created-by'].data).toEqual({ type: 'users', id: person.userId });
      const commented = await call('post', `/runs/${runId}/comments`, person.token, {
        data: { type: 'comments', attributes: { body: 'Checked the plan' } },
      });
      expect(commented.status).toBe(201);

      const asOwner = await call('get', `/runs/${runId}/run-events?include=actor,comment`, acme.organizationToken);
      expect(asOwner.status).toBe(200);
      expect(
        asOwner.body.data.map((event: { relationships: { actor: { data: { id: string } } } }) => event.relationships.actor.data.id),
      ).toEqual([person.userId, person.userId]);
      const users = (asOwner.body.included as { type: string; id: string; attributes: Record<string, unknown> }[]).filter(
        (resource) => resource.type === 'users',
      );
      expect(users).toEqual([
        expect.objectContaining({
          id: person.userId,
          type: 'users',
          attributes: expect.objectContaining({
            username: person.username,
            'avatar-url': expect.stringMatching(/^https:\/\/www\.gravatar\.com\/avatar\/[0-9a-f]{32}/),
            'is-service-account': false,
            'v2-only': false,
            'two-factor': { enabled: false, verified: false },
          }),
          links: { self: `/api/v2/users/${person.userId}` },
        }),
      ]);
      // Another user's email is not shown (as HCP's GET /users/:id); the person's own account shows it.
      expect(users[0]?.attributes['email']).toBeUndefined();
      const asPerson = await call('get', `/runs/${runId}/run-events?include=actor`, person.token);
      expect(asPerson.body.included).toEqual([
        expect.objectContaining({
          id: person.userId,
          attributes: expect.objectContaining({ email: expect.stringMatching(/@example\.test$/) }),
        }),
      ]);
      // The run's own include names them the same way.
      const run = await call('get', `/runs/${runId}?include=created_by`, acme.organizationToken);
      expect(run.body.included).toEqual([expect.objectContaining({ id: person.userId, attributes: users[0]?.attributes })]);

      // A person's audited action: locking a workspace (not the run's, which its run holds), and unlocking it.
      const lockable = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('lockable'));
      await grantWorkspace(h, acme.organizationToken, writers, lockable, { access: 'write' });
      expect((await call('post', `/workspaces/${lockable}/actions/lock`, person.token, { reason: 'maintenance' })).status).toBe(200);
      expect((await call('post', `/workspaces/${lockable}/actions/unlock`, person.token)).status).toBe(200);
      const events = (await trail()).filter((event) => event.auth.accessor_id === person.userId);
      expect(events.map((event) => event.resource.action)).toEqual(['accept', 'lock', 'unlock']);
      for (const event of events)
        expect(event.auth).toEqual({
          accessor_id: person.userId,
          description: person.username,
          type: 'Client',
          impersonator_id: null,
          organization_id: acmeId,
        });
    });
  });

  describe('refusals: a clear 4xx, nothing changed, recorded in the audit trail', () => {
    const refusals = async (type: string): Promise<TrailEvent[]> =>
      (await trail()).filter((event) => event.resource.action === 'refuse' && event.resource.type === type);

    it('a malformed email, a duplicate membership, a team of another organization', async () => {
      const other = await seedOrganization(h, uniqueName('records-other'));
      const email = `${uniqueName('twice')}@example.test`;
      expect((await invite(email)).status).toBe(201);
      const before = await counts();
      const trailBefore = (await refusals('organization_membership')).length;

      expectError(await invite('not-an-email-address'), 422, '/data/attributes/email');
      expect(expectError(await invite(email.toUpperCase()), 422, '/data/attributes/email').detail).toContain('already a member');
      expectError(await invite(`${uniqueName('fresh')}@example.test`, [other.teamId]), 422, '/data/relationships/teams/data/0/id');

      expect(await counts()).toEqual(before);
      const recorded = (await refusals('organization_membership')).slice(trailBefore);
      expect(recorded.map((event) => [event.resource.id, event.resource.meta?.['status'], event.resource.meta?.['pointer']])).toEqual([
        [acmeId, 422, '/data/attributes/email'],
        [acmeId, 422, '/data/attributes/email'],
        [acmeId, 422, '/data/relationships/teams/data/0/id'],
      ]);
      expect(recorded[1]?.resource.meta?.['detail']).toContain('already a member');
      for (const event of recorded) expect(event.auth).toMatchObject({ accessor_id: `user-api-${acmeId}`, type: 'Client' });
      // The other organization's trail has none of it.
      expect((await trail(other.organizationToken)).filter((event) => event.resource.action === 'refuse')).toEqual([]);
    });

    it('an unknown user or membership for a team', async () => {
      const team = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('members'));
      const before = await counts();
      const trailBefore = (await refusals('team_membership')).length;
      expect(
        expectError(
          await call('post', `/teams/${team}/relationships/users`, acme.organizationToken, {
            data: [{ type: 'users', id: 'nobody-at-all' }],
          }),
          422,
          '/data/0/id',
        ).detail,
      ).toContain('nobody-at-all');
      expectError(
        await call('post', `/teams/${team}/relationships/organization-memberships`, acme.organizationToken, {
          data: [{ type: 'organization-memberships', id: 'ou-doesnotexist000000' }],
        }),
        422,
        '/data/0/id',
      );
      expectError(
        await call('delete', `/teams/${team}/relationships/users`, acme.organizationToken, { data: [{ type: 'teams', id: 'x' }] }),
        422,
      );
      expect(await counts()).toEqual(before);
      const recorded = (await refusals('team_membership')).slice(trailBefore);
      expect(recorded.map((event) => [event.resource.id, event.resource.meta?.['pointer']])).toEqual([
        [team, '/data/0/id'],
        [team, '/data/0/id'],
        [team, '/data/0/type'],
      ]);
      // A team the caller cannot see is a 404, recorded nowhere (anyone could fill a trail with those).
      expectNotFound(
        await call('post', '/teams/team-doesnotexist00000/relationships/users', acme.organizationToken, {
          data: [{ type: 'users', id: 'nobody-at-all' }],
        }),
      );
      expect(await refusals('team_membership')).toHaveLength(trailBefore + 3);
    });

    it('a CI identity token that matches no trust rule, named by its subject, never the token', async () => {
      const workspace = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ci'));
      const rule = await call('post', `/workspaces/${workspace}/ci-trust-rules`, acme.organizationToken, {
        data: { type: 'ci-trust-rules', attributes: { issuer: issuer.url, audience, claims: { repository: 'octo/app' } } },
      });
      expect(rule.status).toBe(201);
      // An organization with no rule of this issuer hears nothing of it.
      const bystander = await seedOrganization(h, uniqueName('records-bystander'));
      const idToken = await issuer.sign({ aud: audience, sub: 'repo:octo/evil:ref:refs/heads/main', repository: 'octo/evil' });
      const before = await sql<{ n: number }>(`select count(*)::int as n from runs`);
      const refused = await call('post', '/ci-token-exchanges', undefined, {
        data: { type: 'ci-token-exchanges', attributes: { 'id-token': idToken } },
      });
      expectError(refused, 403);
      expect(await sql<{ n: number }>(`select count(*)::int as n from runs`)).toEqual(before);
      const recorded = await refusals('ci_token_exchange');
      expect(recorded).toHaveLength(1);
      expect(recorded[0]).toMatchObject({
        auth: { accessor_id: null, description: 'repo:octo/evil:ref:refs/heads/main', type: 'System', organization_id: acmeId },
        resource: { id: issuer.url, meta: { reason: expect.stringContaining('No trust rule') } },
        request: { id: expect.any(String), client_address: expect.any(String) },
      });
      expect(JSON.stringify(recorded)).not.toContain(idToken);
      expect((await trail(bystander.organizationToken)).filter((event) => event.resource.action === 'refuse')).toEqual([]);
    });
  });
});
