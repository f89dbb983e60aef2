import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { api, createTeam, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Tokens by id (`/authentication-tokens/:token_id`) and an organization's team tokens, as go-tfe's
 * TeamTokens uses them: owners only, active tokens only, `q` on the team name and `sort` on expiry.
 */
describe('team tokens by id and per organization (golden)', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  let first: { id: string; teamId: string; teamName: string };
  let second: { id: string; teamId: string; teamName: string };

  const issue = async (teamName: string, expiredAt: string) => {
    const teamId = await createTeam(h, acme.organization, acme.organizationToken, teamName);
    const res = await api(h, 'post', `/teams/${teamId}/authentication-token`, acme.organizationToken, {
      data: { type: '', attributes: { 'expired-at': expiredAt } },
    });
    expect(res.status).toBe(201);
    return { id: res.body.data.id as string, teamId, teamName };
  };
  const list = (query = '', token = acme.organizationToken) =>
    api(h, 'get', `/organizations/${acme.organization}/team-tokens${query}`, token);
  const ids = (res: { body: { data: { id: string }[] } }) => res.body.data.map((token) => token.id);

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('tt'));
    other = await seedOrganization(h, uniqueName('tt-other'));
    first = await issue(uniqueName('alpha'), '2999-01-02T00:00:00.000Z');
    second = await issue(uniqueName('beta'), '2999-01-03T00:00:00.000Z');
  });

  afterAll(async () => {
    await h?.close();
  });

  it('shows a token by id, without its secret, with its team and creator', async () => {
    const res = await api(h, 'get', `/authentication-tokens/${first.id}`, acme.organizationToken);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      id: first.id,
      type: 'authentication-tokens',
      attributes: {
        description: null,
        token: null,
        'created-at': expect.any(String),
        'last-used-at': null,
        'expired-at': '2999-01-02T00:00:00.000Z',
      },
      relationships: {
        team: { data: { type: 'teams', id: first.teamId } },
        'created-by': { data: { type: 'users', id: expect.stringMatching(/^user-api-org-/) } },
      },
      links: { self: `/api/v2/authentication-tokens/${first.id}` },
    });
    expect((await api(h, 'get', `/authentication-tokens/${first.id}`, h.adminToken)).status).toBe(200);
  });

  it("is a 404 for another organization's owner, a team token and an unknown id", async () => {
    expectNotFound(await api(h, 'get', `/authentication-tokens/${first.id}`, other.organizationToken));
    expectNotFound(await api(h, 'delete', `/authentication-tokens/${first.id}`, other.organizationToken));
    expectNotFound(await api(h, 'get', '/authentication-tokens/at-doesnotexist00000', acme.organizationToken));
    expectNotFound(await list('', other.organizationToken));
  });

  it('lists the active team tokens, filtered by team name and sorted by expiry', async () => {
    const all = await list();
    expect(all.status).toBe(200);
    expect(ids(all).sort()).toEqual([first.id, second.id].sort());
    expect(all.body.meta.pagination['total-count']).toBe(2);
    expect(ids(await list(`?q=${encodeURIComponent(first.teamName.toUpperCase())}`))).toEqual([first.id]);
    expect(ids(await list('?q=%25'))).toEqual([]);
    expect(ids(await list('?sort=expired-at'))).toEqual([first.id, second.id]);
    expect(ids(await list('?sort=-expired-at'))).toEqual([second.id, first.id]);
    expect(expectError(await list('?sort=name'), 422).source).toEqual({ parameter: 'sort' });
  });

  it('revokes a token by id (204): the token stops working and leaves the list', async () => {
    const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('gamma'));
    const created = await api(h, 'post', `/teams/${teamId}/authentication-token`, acme.organizationToken);
    const secret = created.body.data.attributes.token as string;
    expect((await api(h, 'get', `/organizations/${acme.organization}`, secret)).status).toBe(200);
    expect((await api(h, 'delete', `/authentication-tokens/${created.body.data.id}`, acme.organizationToken)).status).toBe(204);
    expect((await api(h, 'get', `/organizations/${acme.organization}`, secret)).status).toBe(401);
    expectNotFound(await api(h, 'get', `/authentication-tokens/${created.body.data.id}`, acme.organizationToken));
    expectNotFound(await api(h, 'delete', `/authentication-tokens/${created.body.data.id}`, acme.organizationToken));
    expect(ids(await list())).not.toContain(created.body.data.id);
  });
});
