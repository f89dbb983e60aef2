import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exchangeIdentity, identitySource } from '../src/ci-identity.ts';
import { startHarness, type Harness } from '../../test/support/harness.ts';
import { api, seedOrganization, uniqueName, type Fixture } from '../../test/support/fixtures.ts';
import { startTestIssuer, type TestIssuer } from '../../test/support/oidc-issuer.ts';

/**
 * The CLI without RUNTASKS_TOKEN: it asks GitHub's token endpoint (here a loopback stand-in that signs
 * with a real issuer's key) for an identity token with the service as its audience, or takes GitLab's
 * from RUNTASKS_ID_TOKEN, and exchanges it at the real service.
 */
describe('runtasks CLI: the CI identity token exchange', () => {
  let h: Harness;
  let issuer: TestIssuer;
  let acme: Fixture;
  let github: Server;
  let githubUrl = '';
  const requested: { audience: string | null; authorization: string | undefined }[] = [];

  beforeAll(async () => {
    issuer = await startTestIssuer();
    h = await startHarness({ env: { CI_TOKEN_ISSUERS: issuer.url } });
    acme = await seedOrganization(h, uniqueName('cli-ci'));
    const rule = await api(h, 'post', `/workspaces/${acme.workspaceId}/ci-trust-rules`, acme.organizationToken, {
      data: { type: 'ci-trust-rules', attributes: { issuer: issuer.url, audience: h.baseUrl, claims: { repository: 'octo/app' } } },
    });
    expect(rule.status).toBe(201);
    github = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://github.test');
      requested.push({ audience: url.searchParams.get('audience'), authorization: req.headers.authorization });
      void issuer
        .sign({ repository: 'octo/app', aud: url.searchParams.get('audience') ?? '' })
        .then((value) => res.end(JSON.stringify({ value })));
    });
    await new Promise<void>((resolve) => github.listen(0, '127.0.0.1', resolve));
    githubUrl = `http://127.0.0.1:${(github.address() as AddressInfo).port}/token?api-version=2.0`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => github?.close(() => resolve()));
    await h?.close();
    await issuer?.close();
  });

  it("asks GitHub for a token for the service's address and gets a working one", async () => {
    const source = identitySource({ ACTIONS_ID_TOKEN_REQUEST_URL: githubUrl, ACTIONS_ID_TOKEN_REQUEST_TOKEN: 'request-secret' });
    expect(source?.kind).toBe('github');
    const token = await exchangeIdentity(h.baseUrl, source!);
    expect(requested.at(-1)).toEqual({ audience: h.baseUrl, authorization: 'bearer request-secret' });
    expect((await api(h, 'get', `/workspaces/${acme.workspaceId}`, token)).status).toBe(200);
  });

  it("takes GitLab's identity token from RUNTASKS_ID_TOKEN before anything else", async () => {
    const idToken = await issuer.sign({ repository: 'octo/app', aud: h.baseUrl });
    const source = identitySource({
      RUNTASKS_ID_TOKEN: `${idToken}\n`,
      ACTIONS_ID_TOKEN_REQUEST_URL: githubUrl,
      ACTIONS_ID_TOKEN_REQUEST_TOKEN: 'x',
    });
    expect(source).toEqual({ kind: 'variable', name: 'RUNTASKS_ID_TOKEN', token: idToken });
    const token = await exchangeIdentity(h.baseUrl, source!);
    expect((await api(h, 'get', `/workspaces/${acme.workspaceId}`, token)).status).toBe(200);
  });

  it('says why the service refused a token no rule trusts, as an authentication failure', async () => {
    const idToken = await issuer.sign({ repository: 'octo/other', aud: h.baseUrl });
    await expect(exchangeIdentity(h.baseUrl, { kind: 'variable', name: 'RUNTASKS_ID_TOKEN', token: idToken })).rejects.toMatchObject({
      kind: 'auth',
      message: expect.stringContaining('No trust rule'),
    });
  });

  it('offers nothing without either', () => {
    expect(identitySource({ ACTIONS_ID_TOKEN_REQUEST_URL: githubUrl })).toBeUndefined();
  });
});
