import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { JWTPayload } from 'jose';
import { OrganizationMembership, User } from '@runtasks/shared/db';
import { api, createTeam, patiently, seedOrganization, uniqueName, type Fixture } from '../../../test/support/fixtures.ts';
import type { Harness } from '../../../test/support/harness.ts';
import { startTestIssuer, type TestIssuer } from '../../../test/support/oidc-issuer.ts';
import {
  browse,
  startSsoHarness,
  CookieJar,
  signInAtProvider,
  startTestProvider,
  type TestProvider,
} from '../../../test/support/oidc-provider.ts';

type Resign = (claims: JWTPayload) => Promise<string>;

/**
 * Single sign-on to the run pages (docs/sso.md, "People signing in to the run pages") through a real
 * OpenID Connect provider on loopback (oidc-provider), over HTTP: the whole authorization-code flow
 * with PKCE, a person made on their first sign-in, teams from the groups claim at every sign-in,
 * sessions under the run pages' rules, and every tampering refused with a 4xx that creates nothing.
 * The default rate limit is on (`ops: true`).
 */
describe('run pages: single sign-on with OpenID Connect', () => {
  let h: Harness;
  let provider: TestProvider;
  let otherIssuer: TestIssuer;
  let acme: Fixture;
  let developers: { id: string; name: string };
  let mapped: Fixture;
  let platformTeam: { id: string; name: string };

  const users = (email: string) => h.orm.em.fork().count(User, { email });
  const userByEmail = (email: string) => h.orm.em.fork().findOneOrFail(User, { email });
  const teamsOf = async (userId: string): Promise<string[]> =>
    (
      await h.orm.em
        .fork()
        .execute<{ team_id: string }[]>(
          `select x.team_id from team_memberships x join organization_memberships m on m.id = x.membership_id where m.user_id = ? order by 1`,
          [userId],
        )
    ).map((row) => row.team_id);
  const auditEvents = (organization: string, action: string) =>
    h.orm.em
      .fork()
      .execute<
        { actor_id: string | null; actor_description: string | null; resource_type: string; meta: Record<string, unknown> | null }[]
      >(
        `select e.actor_id, e.actor_description, e.resource_type, e.meta from audit_events e join organizations o on o.id = e.organization_id
          where o.name = ? and e.action = ? order by e.timestamp`,
        [organization, action],
      );

  /** A whole sign-in in a fresh browser: the callback's answer, and the browser's cookies. */
  async function signIn(login: string, next?: string, change?: (callback: URL) => void) {
    const jar = new CookieJar();
    const callback = new URL(await signInAtProvider(jar, h.baseUrl, login, next));
    change?.(callback);
    const response = await browse(jar, callback.href);
    return { response, jar, body: await response.text() };
  }

  beforeAll(async () => {
    provider = await startTestProvider();
    otherIssuer = await startTestIssuer();
    h = await startSsoHarness(provider);
    acme = await seedOrganization(h, uniqueName('sso'));
    const developersName = uniqueName('developers');
    developers = { id: await createTeam(h, acme.organization, acme.organizationToken, developersName), name: developersName };
    mapped = await seedOrganization(h, uniqueName('sso-mapped'));
    const platformName = uniqueName('platform');
    platformTeam = { id: await createTeam(h, mapped.organization, mapped.organizationToken, platformName), name: platformName };
    const patched = await api(h, 'patch', `/organizations/${mapped.organization}`, mapped.organizationToken, {
      data: { type: 'organizations', attributes: { 'sso-team-mapping': { 'idp-platform-engineers': platformName } } },
    });
    expect(patched.status).toBe(200);
  });
  afterAll(async () => {
    await h?.close();
    await provider?.close();
    await otherIssuer?.close();
  });

  it("says so in every organization's entitlement set (sso), beside the audit trail's (audit-logging)", async () => {
    const res = await api(h, 'get', `/organizations/${acme.organization}/entitlement-set`, acme.organizationToken);
    expect(res.status).toBe(200);
    expect(res.body.data.attributes).toMatchObject({ sso: true, 'audit-logging': true });
  });

  it('offers "Sign in with SSO" on the sign-in page, beside the token form', async () => {
    const page = await h.http.get('/session?next=/app/x');
    expect(page.status).toBe(200);
    expect(page.text).toContain('href="/session/oidc?next=%2Fapp%2Fx"');
    expect(page.text).toContain('Sign in with SSO');
    expect(page.text).toContain('name="token"');
  });

  it('a first sign-in creates the person; the mapped claim value makes them a member on the mapped team; the page shows their name', async () => {
    provider.setPerson('bob', { email: 'bob@example.test', preferredUsername: 'bob-sso', name: 'Bob', groups: ['idp-platform-engineers'] });
    expect(await users('bob@example.test')).toBe(0);
    const { response, jar } = await signIn('bob', `/app/${mapped.organization}`);
    expect(response.status).toBe(303);
    expect(response.headers.get('location')).toBe(`/app/${mapped.organization}`);
    const bob = await userByEmail('bob@example.test');
    expect(bob.username).toBe('bob-sso');
    expect(await teamsOf(bob.id)).toEqual([platformTeam.id]);
    const page = await browse(jar, `${h.baseUrl}/app/${mapped.organization}`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Signed in as <strong>bob-sso</strong>');
    // The sign-in and the team change are in the organization's audit trail, naming the person.
    expect(await auditEvents(mapped.organization, 'sign_in')).toEqual([
      expect.objectContaining({
        actor_id: bob.id,
        resource_type: 'session',
        meta: expect.objectContaining({ method: 'oidc', how: 'created' }),
      }),
    ]);
    expect(await auditEvents(mapped.organization, 'create')).toContainEqual(
      expect.objectContaining({ actor_id: bob.id, resource_type: 'team_membership' }),
    );
    // Only teams the mapping names are managed: the organization's other team was not given by name.
    expect(await teamsOf(bob.id)).not.toContain(mapped.teamId);
  });

  it('links an invited person by verified email; team names match the groups claim; leaving a group drops the team at the next sign-in', async () => {
    const invited = await api(h, 'post', `/organizations/${acme.organization}/organization-memberships`, acme.organizationToken, {
      data: { type: 'organization-memberships', attributes: { email: 'alice@example.test' } },
    });
    expect(invited.status).toBe(201);
    const alice = await userByEmail('alice@example.test');
    provider.setPerson('alice', { email: 'alice@example.test', name: 'Alice', groups: [developers.name, 'unrelated-group'] });

    const first = await signIn('alice');
    expect(first.response.status).toBe(303);
    expect(await users('alice@example.test')).toBe(1);
    expect(await teamsOf(alice.id)).toEqual([developers.id]);
    const membership = await h.orm.em.fork().findOneOrFail(OrganizationMembership, { user: alice.id });
    expect(membership.status).toBe('active');

    provider.setPerson('alice', { email: 'alice@example.test', name: 'Alice', groups: ['unrelated-group'] });
    const second = await signIn('alice');
    expect(second.response.status).toBe(303);
    expect(await teamsOf(alice.id)).toEqual([]);
    expect(await auditEvents(acme.organization, 'destroy')).toContainEqual(
      expect.objectContaining({ actor_id: alice.id, resource_type: 'team_membership', meta: { team: developers.id, user: alice.id } }),
    );
    // Still a member (teams come and go with the claim, the membership stays): the pages open.
    const page = await browse(second.jar, `${h.baseUrl}/app/${acme.organization}`);
    expect(page.status).toBe(200);
  });

  it('two first sign-ins of one person at once (two tabs) both succeed, with one user', async () => {
    provider.setPerson('frank', { email: 'frank@example.test', groups: ['idp-platform-engineers'] });
    const tabs = [new CookieJar(), new CookieJar()];
    const callbacks = await Promise.all(tabs.map((jar) => signInAtProvider(jar, h.baseUrl, 'frank')));
    const answers = await Promise.all(tabs.map((jar, index) => browse(jar, callbacks[index] ?? '')));
    expect(answers.map((answer) => answer.status)).toEqual([303, 303]);
    expect(await users('frank@example.test')).toBe(1);
    expect(await teamsOf((await userByEmail('frank@example.test')).id)).toEqual([platformTeam.id]);
  });

  it('refuses a malformed sso-team-mapping (422 with its pointer), changing nothing', async () => {
    for (const mapping of ['owners', { 'idp-x': 7 }, { '': 'owners' }]) {
      const res = await api(h, 'patch', `/organizations/${mapped.organization}`, mapped.organizationToken, {
        data: { type: 'organizations', attributes: { 'sso-team-mapping': mapping } },
      });
      expect(res.status).toBe(422);
      expect(res.body.errors[0].source.pointer).toMatch(/^\/data\/attributes\/sso-team-mapping/);
    }
    const read = await api(h, 'get', `/organizations/${mapped.organization}`, mapped.organizationToken);
    expect(read.body.data.attributes['sso-team-mapping']).toEqual({ 'idp-platform-engineers': platformTeam.name });
  });

  it("signing out ends the person's session on the server", async () => {
    provider.setPerson('hank', { email: 'hank@example.test', groups: ['idp-platform-engineers'] });
    const { response, jar } = await signIn('hank');
    expect(response.status).toBe(303);
    const page = await browse(jar, `${h.baseUrl}/app/${mapped.organization}`);
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(await page.text())?.[1] ?? '';
    const session = jar.get(h.baseUrl, 'runtasks_session') ?? '';
    const out = await browse(jar, `${h.baseUrl}/session/sign-out`, { method: 'POST', form: { csrf } });
    expect(out.status).toBe(303);
    const rows = await h.orm.em.fork().execute(`select 1 from page_sessions where id_hash = ?`, [h.secrets.hashToken(session)]);
    expect(rows).toHaveLength(0);
    const again = new CookieJar();
    again.take(h.baseUrl, new Response(null, { headers: { 'set-cookie': `runtasks_session=${session}` } }));
    expect((await browse(again, `${h.baseUrl}/app/${mapped.organization}`)).status).toBe(303);
  });

  it('a session ends when the person is removed from the organization', async () => {
    provider.setPerson('carol', { email: 'carol@example.test', groups: ['idp-platform-engineers'] });
    const { response, jar } = await signIn('carol');
    expect(response.status).toBe(303);
    expect((await browse(jar, `${h.baseUrl}/app/${mapped.organization}`)).status).toBe(200);
    const carol = await userByEmail('carol@example.test');
    const membership = await h.orm.em.fork().findOneOrFail(OrganizationMembership, { user: carol.id });
    const removed = await api(h, 'delete', `/organization-memberships/${membership.id}`, mapped.organizationToken);
    expect(removed.status).toBe(204);
    const after = await browse(jar, `${h.baseUrl}/app/${mapped.organization}`);
    expect(after.status).toBe(303);
    expect(after.headers.get('location')).toBe(`/session?next=/app/${mapped.organization}`);
  });

  describe('refusals: a 4xx, nobody created, the refusal recorded', () => {
    beforeAll(() => {
      provider.setPerson('mallory', { email: 'mallory@example.test', groups: ['idp-platform-engineers'] });
    });

    it.each([
      ['a wrong state', (callback: URL) => callback.searchParams.set('state', 'not-the-state-we-sent')],
      ['no state', (callback: URL) => callback.searchParams.delete('state')],
    ])('%s is refused (401)', async (_label, change) => {
      const before = (await auditEvents(mapped.organization, 'refuse')).length;
      const { response, body } = await signIn('mallory', `/app/${mapped.organization}`, change);
      expect(response.status).toBe(401);
      expect(body).toContain('did not verify');
      expect(body).toMatch(/state/);
      expect(response.headers.get('content-type')).toContain('text/html');
      expect(await users('mallory@example.test')).toBe(0);
      const refusals = await auditEvents(mapped.organization, 'refuse');
      expect(refusals).toHaveLength(before + 1);
      expect(refusals.at(-1)).toMatchObject({ actor_id: null, resource_type: 'session' });
    });

    it('a callback in a browser that did not start the sign-in is refused (400), and a callback is good once', async () => {
      const jar = new CookieJar();
      const callback = await signInAtProvider(jar, h.baseUrl, 'mallory');
      const elsewhere = await browse(new CookieJar(), callback);
      expect(elsewhere.status).toBe(400);
      expect(await elsewhere.text()).toContain('not started in this browser');
      const ok = await browse(jar, callback);
      expect(ok.status).toBe(303);
      const replayed = await browse(jar, callback);
      expect(replayed.status).toBe(400);
      // Mallory is a real person of the provider: the good callback made her (this test's control).
      expect(await users('mallory@example.test')).toBe(1);
    });

    it.each([
      ['a tampered nonce', (claims: JWTPayload, resign: Resign) => resign({ ...claims, nonce: 'another-nonce' }), 'nonce'],
      ['another audience', (claims: JWTPayload, resign: Resign) => resign({ ...claims, aud: 'another-client' }), 'audience'],
      // A real token of another issuer (its own key), for this person and this client.
      ['another issuer', (claims: JWTPayload) => otherIssuer.sign({ ...claims, iss: undefined }), 'issuer'],
    ])('an ID token with %s is refused (401)', async (_label, replace, claim) => {
      provider.setPerson('eve', { email: 'eve@example.test', groups: ['idp-platform-engineers'] });
      provider.tamperIdTokens(replace);
      try {
        const { response, body } = await signIn('eve', `/app/${mapped.organization}`);
        expect(response.status).toBe(401);
        expect(body).toContain('did not verify');
        expect(body).toContain(claim);
        expect(
          response.headers.getSetCookie().some((cookie) => cookie.startsWith('runtasks_session=') && !cookie.includes('Max-Age=0')),
        ).toBe(false);
      } finally {
        provider.tamperIdTokens(undefined);
      }
      expect(await users('eve@example.test')).toBe(0);
    });

    it('an unverified email address of an existing user is refused (403), the existing user untouched', async () => {
      provider.setPerson('impostor', { email: 'alice@example.test', emailVerified: false, groups: [developers.name] });
      const alice = await userByEmail('alice@example.test');
      const teamsBefore = await teamsOf(alice.id);
      const { response, body } = await signIn('impostor');
      expect(response.status).toBe(403);
      expect(body).toContain('has not verified');
      expect(await teamsOf(alice.id)).toEqual(teamsBefore);
      // Recorded in the trail of the organizations of the user the address belongs to.
      expect((await auditEvents(acme.organization, 'refuse')).at(-1)).toMatchObject({ actor_description: alice.id });
    });
  });

  it('token sign-in switched off: the form is gone, a posted token is refused (403), SSO still works', async () => {
    Object.assign(h.config, { pagesTokenSignIn: false });
    try {
      const page = await patiently(h.http.get('/session'));
      expect(page.status).toBe(200);
      expect(page.text).toContain('Sign in with SSO');
      expect(page.text).not.toContain('name="token"');
      const posted = await patiently(h.http.post('/session').type('form').send({ token: acme.organizationToken, csrf: 'x' }));
      expect(posted.status).toBe(403);
      expect(posted.text).toContain('switched off');
      expect(posted.headers['set-cookie']).toBeUndefined();
      provider.setPerson('grace', { email: 'grace@example.test', groups: [] });
      const { response } = await signIn('grace');
      expect(response.status).toBe(303);
    } finally {
      Object.assign(h.config, { pagesTokenSignIn: true });
    }
  });
});
