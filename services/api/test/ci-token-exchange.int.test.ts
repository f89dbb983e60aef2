import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import {
  api,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  eventually,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { startTestIssuer, type TestIssuer } from '../../../test/support/oidc-issuer.ts';

/**
 * Pipelines without a stored secret: a workspace trusts a CI issuer's identity tokens with given
 * claims, and such a token, verified against the issuer's keys (a real issuer on loopback), is
 * exchanged for a short-lived token that drives that workspace's runs and nothing else.
 */
describe('CI identity token exchange', () => {
  let h: Harness;
  let issuer: TestIssuer;
  let acme: Fixture;
  let otherWorkspace: string;
  let readerToken: string;
  const audience = 'https://runtasks.example.test';
  const claims = { repository: 'octo/app', ref: 'refs/heads/main', sub: 'repo:octo/app:ref:refs/heads/main' };

  const rules = (workspaceId: string) => `/workspaces/${workspaceId}/ci-trust-rules`;
  const ruleDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'ci-trust-rules', attributes } });
  const exchange = (idToken: string, extra: Record<string, unknown> = {}) =>
    api(h, 'post', '/ci-token-exchanges', undefined, {
      data: { type: 'ci-token-exchanges', attributes: { 'id-token': idToken, ...extra } },
    });
  const runCount = async (): Promise<number> => {
    const [row] = await h.orm.em.fork().getConnection().execute<{ n: number }[]>(`select count(*)::int as n from runs`);
    return row?.n ?? -1;
  };

  beforeAll(async () => {
    issuer = await startTestIssuer();
    // Many requests a second from one token: the rate limit (its own tests hold it) is raised so that what
    // is checked here is the exchange, not the limiter.
    h = await startHarness({
      ops: true,
      env: { CI_TOKEN_ISSUERS: `${issuer.url},https://gitlab.com`, CI_TOKEN_TTL_SECONDS: '300', RATE_LIMIT_PER_SECOND: '1000' },
    });
    acme = await seedOrganization(h, uniqueName('ci'));
    otherWorkspace = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ci-other'));
    const readers = await createTeam(h, acme.organization, acme.organizationToken, 'readers');
    readerToken = await createTeamToken(h, acme.organizationToken, readers);
    const res = await api(
      h,
      'post',
      rules(acme.workspaceId),
      acme.organizationToken,
      ruleDocument({ issuer: issuer.url, audience, claims: { repository: 'octo/app', ref: 'refs/heads/*' } }),
    );
    expect(res.status).toBe(201);
  });
  afterAll(async () => {
    await h?.close();
    await issuer?.close();
  });

  describe('trust rules', () => {
    it('are created by an owner, the audience defaulting to the public URL, and listed', async () => {
      const workspace = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ci-rules'));
      const created = await api(
        h,
        'post',
        rules(workspace),
        acme.organizationToken,
        ruleDocument({ issuer: issuer.url, claims: { project_path: 'group/*' } }),
      );
      expect(created.status).toBe(201);
      expect(created.body.data).toMatchObject({
        type: 'ci-trust-rules',
        attributes: { issuer: issuer.url, audience: 'http://runtasks.test', claims: { project_path: 'group/*' } },
        relationships: { workspace: { data: { type: 'workspaces', id: workspace } } },
      });
      const listed = await api(h, 'get', rules(workspace), acme.organizationToken);
      expect(listed.body.data.map((rule: { id: string }) => rule.id)).toEqual([created.body.data.id]);
      const changed = await api(
        h,
        'patch',
        `/ci-trust-rules/${created.body.data.id}`,
        acme.organizationToken,
        ruleDocument({ audience: 'other' }),
      );
      expect(changed.body.data.attributes).toMatchObject({ audience: 'other', claims: { project_path: 'group/*' } });
      expect((await api(h, 'delete', `/ci-trust-rules/${created.body.data.id}`, acme.organizationToken)).status).toBe(204);
      expectNotFound(await api(h, 'get', `/ci-trust-rules/${created.body.data.id}`, acme.organizationToken));
    });

    it.each([
      [{ issuer: 'https://evil.example', claims: { repository: 'a/b' } }, '/data/attributes/issuer'],
      [{ issuer: 'ISSUER', claims: {} }, '/data/attributes/claims'],
      [{ issuer: 'ISSUER', claims: { repository: '*' } }, '/data/attributes/claims/repository'],
      [{ issuer: 'ISSUER', claims: { aud: 'x' } }, '/data/attributes/claims/aud'],
      [{ issuer: 'ISSUER', claims: 'octo/app' }, '/data/attributes/claims'],
      [{ claims: { repository: 'a/b' } }, '/data/attributes/issuer'],
      [{ issuer: 'ISSUER' }, '/data/attributes/claims'],
    ])('refuse %j with a 422 at %s and keep nothing', async (attributes, pointer) => {
      const workspace = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ci-bad'));
      const body = { ...attributes, ...('issuer' in attributes && attributes.issuer === 'ISSUER' ? { issuer: issuer.url } : {}) };
      expectError(await api(h, 'post', rules(workspace), acme.organizationToken, ruleDocument(body)), 422, pointer);
      expect((await api(h, 'get', rules(workspace), acme.organizationToken)).body.data).toEqual([]);
    });

    it('are hidden (404) from a team that only reads the workspace, and from other organizations', async () => {
      expectNotFound(await api(h, 'get', rules(acme.workspaceId), readerToken));
      expectNotFound(
        await api(h, 'post', rules(acme.workspaceId), readerToken, ruleDocument({ issuer: issuer.url, claims: { repository: 'x/y' } })),
      );
      const other = await seedOrganization(h, uniqueName('ci-stranger'));
      expectNotFound(await api(h, 'get', rules(acme.workspaceId), other.organizationToken));
      const [rule] = (await api(h, 'get', rules(acme.workspaceId), acme.organizationToken)).body.data as { id: string }[];
      expectNotFound(await api(h, 'get', `/ci-trust-rules/${rule?.id}`, other.organizationToken));
      expectNotFound(await api(h, 'delete', `/ci-trust-rules/${rule?.id}`, readerToken));
    });
  });

  describe('the exchange', () => {
    it("gives a token that drives the matching workspace's runs and nothing else", async () => {
      const res = await exchange(await issuer.sign({ ...claims, aud: audience }));
      expect(res.status).toBe(201);
      const { token, 'expires-at': expiresAt, 'workspace-id': workspaceId } = res.body.data.attributes;
      expect(workspaceId).toBe(acme.workspaceId);
      const lifetime = new Date(expiresAt).getTime() - Date.now();
      expect(lifetime).toBeGreaterThan(200_000);
      expect(lifetime).toBeLessThanOrEqual(300_000);

      const run = await createRun(h, token, acme.workspaceId);
      expect((await api(h, 'get', `/runs/${run}`, token)).status).toBe(200);
      expect((await api(h, 'get', `/workspaces/${acme.workspaceId}`, token)).status).toBe(200);
      expectNotFound(await api(h, 'get', `/workspaces/${otherWorkspace}`, token));
      expectNotFound(
        await api(h, 'post', '/runs', token, {
          data: { type: 'runs', attributes: {}, relationships: { workspace: { data: { type: 'workspaces', id: otherWorkspace } } } },
        }),
      );
      // Not the workspace's settings, its rules, its teams or its tokens.
      expectNotFound(
        await api(h, 'patch', `/workspaces/${acme.workspaceId}`, token, { data: { type: 'workspaces', attributes: { description: 'x' } } }),
      );
      expectNotFound(await api(h, 'get', rules(acme.workspaceId), token));
      expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/teams`, token));
      const listed = await api(h, 'get', `/organizations/${acme.organization}/workspaces`, token);
      expect(listed.body.data.map((workspace: { id: string }) => workspace.id)).toEqual([acme.workspaceId]);
    });

    it('accepts the same identity token again while it lives (a retried job), each answer a working token', async () => {
      const idToken = await issuer.sign({ ...claims, aud: audience });
      const first = await exchange(idToken);
      const second = await exchange(idToken);
      expect([first.status, second.status]).toEqual([201, 201]);
      for (const res of [first, second])
        expect((await api(h, 'get', `/workspaces/${acme.workspaceId}`, res.body.data.attributes.token)).status).toBe(200);
    });

    it.each([
      ['another repository', { ...claims, repository: 'octo/evil', aud: audience }, {}, 403],
      ['another branch pattern', { ...claims, ref: 'refs/tags/v1', aud: audience }, {}, 403],
      ['a wrong audience', { ...claims, aud: 'https://elsewhere.example' }, {}, 403],
      ['an expired token', { ...claims, aud: audience }, { expiresIn: Math.floor(Date.now() / 1000) - 120 }, 401],
      ['a token of an issuer not configured', { ...claims, aud: audience, iss: 'https://token.actions.githubusercontent.com' }, {}, 401],
      ['a token naming a key the issuer does not have', { ...claims, aud: audience }, { kid: 'made-up' }, 401],
    ])('refuses %s with a JSON:API error and changes nothing', async (_label, tokenClaims, options, status) => {
      const before = await runCount();
      const error = expectError(await exchange(await issuer.sign(tokenClaims, options)), status);
      expect(error.detail).toBeTruthy();
      expect(await runCount()).toBe(before);
    });

    it('refuses what is not shaped as a JWT (422 at the field), one that does not verify (401), and a body without one (422)', async () => {
      expectError(await exchange('not-a-jwt'), 422, '/data/attributes/id-token');
      expectError(await exchange('bm90.YS1qd3Q.c2ln'), 401);
      expectError(
        await api(h, 'post', '/ci-token-exchanges', undefined, { data: { type: 'ci-token-exchanges', attributes: {} } }),
        422,
        '/data/attributes/id-token',
      );
    });

    it('follows a rotated key by fetching the key set again', async () => {
      expect((await exchange(await issuer.sign({ ...claims, aud: audience }))).status).toBe(201);
      const fetchesBefore = issuer.keyFetches();
      await issuer.rotate();
      const rotated = await issuer.sign({ ...claims, aud: audience });
      // The key set is fetched again at most every few seconds, whatever kids are sent; each refusal
      // meanwhile counts against the address's failed authentications, so the poll is slow.
      const res = await eventually(
        async () => {
          const answer = await exchange(rotated);
          return answer.status === 201 ? answer : undefined;
        },
        20_000,
        1500,
      );
      expect(res.body.data.attributes['workspace-id']).toBe(acme.workspaceId);
      expect(issuer.keyFetches()).toBeGreaterThan(fetchesBefore);
    });

    it('asks for the workspace when rules of several accept the token, and ends tokens when their rule goes', async () => {
      const second = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ci-second'));
      const created = await api(
        h,
        'post',
        rules(second),
        acme.organizationToken,
        ruleDocument({ issuer: issuer.url, audience, claims: { repository: 'octo/app' } }),
      );
      const idToken = await issuer.sign({ ...claims, aud: audience });
      expectError(await exchange(idToken), 422, '/data/attributes/workspace-id');
      const named = await exchange(idToken, { 'workspace-id': second });
      expect(named.status).toBe(201);
      const token = named.body.data.attributes.token as string;
      expect((await api(h, 'get', `/workspaces/${second}`, token)).status).toBe(200);
      expect((await api(h, 'delete', `/ci-trust-rules/${created.body.data.id}`, acme.organizationToken)).status).toBe(204);
      expectError(await api(h, 'get', `/workspaces/${second}`, token), 401);
    });

    it('refuses a pipeline token that was tampered with', async () => {
      const res = await exchange(await issuer.sign({ ...claims, aud: audience }));
      const token = res.body.data.attributes.token as string;
      const tampered = token.slice(0, -1) + (token.endsWith('a') ? 'b' : 'a');
      expectError(await api(h, 'get', `/workspaces/${acme.workspaceId}`, tampered), 401);
    });
  });
});

describe('CI identity token exchange with the default rate limit', () => {
  let issuer: Awaited<ReturnType<typeof startTestIssuer>>;
  let h: Harness;

  beforeAll(async () => {
    issuer = await startTestIssuer();
    h = await startHarness({ ops: true, env: { CI_TOKEN_ISSUERS: issuer.url } });
  });
  afterAll(async () => {
    await h?.close();
    await issuer?.close();
  });

  it('exchanges a matching token and drives a run, as a pipeline does with the settings a user has', async () => {
    const acme = await seedOrganization(h, uniqueName('ci-defaults'));
    const audience = 'https://runtasks.example.test';
    const rule = await api(h, 'post', `/workspaces/${acme.workspaceId}/ci-trust-rules`, acme.organizationToken, {
      data: { type: 'ci-trust-rules', attributes: { issuer: issuer.url, audience, claims: { repository: 'octo/app' } } },
    });
    expect(rule.status).toBe(201);
    const res = await api(h, 'post', '/ci-token-exchanges', undefined, {
      data: { type: 'ci-token-exchanges', attributes: { 'id-token': await issuer.sign({ repository: 'octo/app', aud: audience }) } },
    });
    expect(res.status).toBe(201);
    const token = res.body.data.attributes.token as string;
    const run = await createRun(h, token, acme.workspaceId);
    expect((await api(h, 'get', `/runs/${run}`, token)).status).toBe(200);
  });
});
