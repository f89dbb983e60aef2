import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, NOT_FOUND, uniqueName } from '../../../test/support/assertions.ts';
import { api, createOrganization, createTeamToken, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Golden tests of `/admin/organizations`, the site admin's view of every organization (as go-tfe's
 * admin client reads it), its settings, and its refusals. Every other caller gets the 404 of a missing
 * resource.
 */

const adminDocument = (attributes: Record<string, unknown>, type = 'organizations') => ({ data: { type, attributes } });

const adminResource = (name: string, externalId: string, attributes: Record<string, unknown> = {}) => ({
  id: name,
  type: 'organizations',
  attributes: {
    name,
    'external-id': externalId,
    'notification-email': `${name}@example.test`,
    'access-beta-tools': false,
    'global-module-sharing': false,
    'global-provider-sharing': false,
    'is-disabled': false,
    'workspace-limit': null,
    'sso-enabled': false,
    'terraform-build-worker-apply-timeout': '24h',
    'terraform-build-worker-plan-timeout': '2h',
    'apply-timeout': '24h',
    'plan-timeout': '2h',
    'terraform-worker-sudo-enabled': false,
    ...attributes,
  },
  links: { self: `/api/v2/admin/organizations/${name}` },
});

describe('/admin/organizations', () => {
  let h: Harness;
  let acme: Fixture;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('acme'));
  });
  afterAll(async () => {
    await h.close();
  });

  const externalId = async (name: string) =>
    (await api(h, 'get', `/organizations/${name}`, h.adminToken)).body.data.attributes['external-id'] as string;

  it('shows an organization whole, with the defaults', async () => {
    const name = await createOrganization(h, uniqueName('shown'));
    const res = await api(h, 'get', `/admin/organizations/${name}`, h.adminToken);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual(adminResource(name, await externalId(name)));
  });

  it('lists every organization, searched by name or email with q, paginated', async () => {
    const tag = uniqueName('listed');
    const [a, b] = [await createOrganization(h, `${tag}-a`), await createOrganization(h, `${tag}-b`)];
    const res = await api(h, 'get', `/admin/organizations?q=${tag}&page%5Bsize%5D=1`, h.adminToken);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([adminResource(a, await externalId(a))]);
    expect(res.body.meta.pagination).toMatchObject({ 'current-page': 1, 'total-count': 2, 'total-pages': 2 });
    const second = await api(h, 'get', `/admin/organizations?q=${tag}&page%5Bnumber%5D=2&page%5Bsize%5D=1`, h.adminToken);
    expect(second.body.data.map((o: { id: string }) => o.id)).toEqual([b]);
    const none = await api(h, 'get', '/admin/organizations?q=no-such-organization', h.adminToken);
    expect(none.body.data).toEqual([]);
    expect(none.body.meta.pagination['total-count']).toBe(0);
  });

  it('refuses include=owners (400): there are no user accounts to include', async () => {
    const res = await api(h, 'get', '/admin/organizations?include=owners', h.adminToken);
    expect(res.status).toBe(400);
  });

  it('stores the settings (type "" as go-tfe sends it), both timeout names showing one value', async () => {
    const name = await createOrganization(h, uniqueName('updated'));
    const attributes = {
      'access-beta-tools': true,
      'global-module-sharing': true,
      'global-provider-sharing': true,
      'is-disabled': false,
      'terraform-build-worker-apply-timeout': '12h',
      'apply-timeout': '12h',
      'plan-timeout': '1h30m',
      'terraform-worker-sudo-enabled': true,
    };
    const res = await api(h, 'patch', `/admin/organizations/${name}`, h.adminToken, adminDocument(attributes, ''));
    expect(res.status).toBe(200);
    const expected = adminResource(name, await externalId(name), {
      ...attributes,
      'terraform-build-worker-plan-timeout': '1h30m',
    });
    expect(res.body.data).toEqual(expected);
    expect((await api(h, 'get', `/admin/organizations/${name}`, h.adminToken)).body.data).toEqual(expected);
  });

  it.each<[Record<string, unknown>, string]>([
    [{ 'is-disabled': true }, '/data/attributes/is-disabled'],
    [{ 'workspace-limit': 42 }, '/data/attributes/workspace-limit'],
    [{ 'workspace-limit': 0 }, '/data/attributes/workspace-limit'],
    [{ 'apply-timeout': '1 day' }, '/data/attributes/apply-timeout'],
    [{ 'terraform-build-worker-plan-timeout': '' }, '/data/attributes/terraform-build-worker-plan-timeout'],
    [{ 'apply-timeout': '1h', 'terraform-build-worker-apply-timeout': '2h' }, '/data/attributes/apply-timeout'],
    [{ 'access-beta-tools': 'maybe' }, '/data/attributes/access-beta-tools'],
  ])('refuses %j with a 422 at its pointer, and changes nothing', async (attributes, pointer) => {
    const name = await createOrganization(h, uniqueName('refused'));
    const before = await api(h, 'get', `/admin/organizations/${name}`, h.adminToken);
    const res = await api(h, 'patch', `/admin/organizations/${name}`, h.adminToken, adminDocument(attributes));
    expectError(res, 422, pointer);
    expect((await api(h, 'get', `/admin/organizations/${name}`, h.adminToken)).body).toEqual(before.body);
  });

  it('refuses another document type (422 at /data/type)', async () => {
    const res = await api(h, 'patch', `/admin/organizations/${acme.organization}`, h.adminToken, adminDocument({}, 'teams'));
    expectError(res, 422, '/data/type');
  });

  it('deletes an organization', async () => {
    const name = await createOrganization(h, uniqueName('deleted'));
    expect((await api(h, 'delete', `/admin/organizations/${name}`, h.adminToken)).status).toBe(204);
    expect((await api(h, 'get', `/admin/organizations/${name}`, h.adminToken)).body).toEqual(NOT_FOUND);
    expect((await api(h, 'get', `/organizations/${name}`, h.adminToken)).body).toEqual(NOT_FOUND);
  });

  it('answers 404 to a missing organization', async () => {
    for (const method of ['get', 'patch', 'delete'] as const) {
      const res = await api(
        h,
        method,
        '/admin/organizations/no-such-org',
        h.adminToken,
        method === 'patch' ? adminDocument({}) : undefined,
      );
      expect(res.body).toEqual(NOT_FOUND);
    }
  });

  it("answers 404 to every token but the site admin, even the organization's own tokens, and changes nothing", async () => {
    const path = `/admin/organizations/${acme.organization}`;
    const teamToken = await createTeamToken(h, acme.organizationToken, acme.teamId);
    for (const token of [acme.organizationToken, teamToken]) {
      expect((await api(h, 'get', '/admin/organizations', token)).body).toEqual(NOT_FOUND);
      expect((await api(h, 'get', path, token)).body).toEqual(NOT_FOUND);
      expect((await api(h, 'patch', path, token, adminDocument({ 'access-beta-tools': true }))).body).toEqual(NOT_FOUND);
      expect((await api(h, 'delete', path, token)).body).toEqual(NOT_FOUND);
    }
    const shown = await api(h, 'get', path, h.adminToken);
    expect(shown.body.data.attributes['access-beta-tools']).toBe(false);
  });
});
