import { beforeAll, describe, expect, it } from '@jest/globals';
import { api, createOrganization, createTeam, createTeamToken, type Fixture, seedOrganization } from '../../../test/support/fixtures.ts';
import { expectError, NOT_FOUND, uniqueName } from '../../../test/support/assertions.ts';
import { organizationDocument } from './organizations/documents.ts';
import { useOrganizationsApi } from './organizations/setup.ts';

describe('organizations API', () => {
  const g = useOrganizationsApi();

  describe('PATCH /organizations/:name', () => {
    let fixture: Fixture;
    let teamToken: string;
    beforeAll(async () => {
      fixture = await seedOrganization(g.h, 'patchable');
      teamToken = await createTeamToken(
        g.h,
        fixture.organizationToken,
        await createTeam(g.h, fixture.organization, fixture.organizationToken, 'patch-team', { 'manage-workspaces': true }),
      );
    });

    it('lets the owner change the email and task-overrides-enabled', async () => {
      const res = await api(
        g.h,
        'patch',
        `/organizations/${fixture.organization}`,
        fixture.organizationToken,
        organizationDocument({ email: 'new@example.test', 'task-overrides-enabled': true }),
      );
      expect(res.status).toBe(200);
      expect(res.body.data.attributes.email).toBe('new@example.test');
      expect(res.body.data.attributes['task-overrides-enabled']).toBe(true);
      const show = await api(g.h, 'get', `/organizations/${fixture.organization}`, fixture.organizationToken);
      expect(show.body.data.attributes.email).toBe('new@example.test');
      expect(show.body.data.attributes['task-overrides-enabled']).toBe(true);

      const off = await api(
        g.h,
        'patch',
        `/organizations/${fixture.organization}`,
        fixture.organizationToken,
        organizationDocument({ 'task-overrides-enabled': 'false' }),
      );
      expect(off.status).toBe(200);
      expect(off.body.data.attributes['task-overrides-enabled']).toBe(false);
      expect(off.body.data.attributes.email).toBe('new@example.test');
    });

    it('answers 422 to an owner changing the edition, and leaves it unchanged', async () => {
      const res = await api(
        g.h,
        'patch',
        `/organizations/${fixture.organization}`,
        fixture.organizationToken,
        organizationDocument({ edition: 'free' }),
      );
      expectError(res, 422, '/data/attributes/edition');
      const show = await api(g.h, 'get', `/organizations/${fixture.organization}`, fixture.organizationToken);
      expect(show.body.data.attributes.edition).toBe('standard');
    });

    it('lets the site admin change the edition', async () => {
      const toFree = await api(
        g.h,
        'patch',
        `/organizations/${fixture.organization}`,
        g.h.adminToken,
        organizationDocument({ edition: 'free' }),
      );
      expect(toFree.status).toBe(200);
      expect(toFree.body.data.attributes.edition).toBe('free');
      const back = await api(
        g.h,
        'patch',
        `/organizations/${fixture.organization}`,
        g.h.adminToken,
        organizationDocument({ edition: 'standard' }),
      );
      expect(back.status).toBe(200);
      expect(back.body.data.attributes.edition).toBe('standard');
    });

    it('ignores unknown attributes and accepts the unchanged name', async () => {
      const res = await api(
        g.h,
        'patch',
        `/organizations/${fixture.organization}`,
        fixture.organizationToken,
        organizationDocument({ name: fixture.organization, 'owners-team-saml-role-id': 'x' }),
      );
      expect(res.status).toBe(200);
      expect(res.body.data.id).toBe(fixture.organization);
    });

    it('answers 422 with a pointer for an invalid new name, a bad email and a wrongly typed flag', async () => {
      const cases: [Record<string, unknown>, string][] = [
        [{ name: 'not a name' }, '/data/attributes/name'],
        [{ email: 'nope' }, '/data/attributes/email'],
        [{ email: 7 }, '/data/attributes/email'],
        [{ 'task-overrides-enabled': 'maybe' }, '/data/attributes/task-overrides-enabled'],
      ];
      for (const [attributes, pointer] of cases) {
        const res = await api(
          g.h,
          'patch',
          `/organizations/${fixture.organization}`,
          fixture.organizationToken,
          organizationDocument(attributes),
        );
        expectError(res, 422, pointer);
      }
      expect((await api(g.h, 'get', `/organizations/${fixture.organization}`, g.h.adminToken)).status).toBe(200);
    });

    it('answers 404 to a team token (even with organization access) and to another organization', async () => {
      const byTeam = await api(
        g.h,
        'patch',
        `/organizations/${fixture.organization}`,
        teamToken,
        organizationDocument({ email: 'team@example.test' }),
      );
      expect(byTeam.status).toBe(404);
      expect(byTeam.body).toEqual(NOT_FOUND);
      const byOther = await api(
        g.h,
        'patch',
        `/organizations/${fixture.organization}`,
        g.other.organizationToken,
        organizationDocument({ email: 'other@example.test' }),
      );
      expect(byOther.status).toBe(404);
      expect(byOther.body).toEqual(NOT_FOUND);
      const show = await api(g.h, 'get', `/organizations/${fixture.organization}`, g.h.adminToken);
      expect(show.body.data.attributes.email).not.toMatch(/^(team|g.other)@/);
    });

    it('answers 404 for a missing organization', async () => {
      const res = await api(g.h, 'patch', '/organizations/missing-org', g.h.adminToken, organizationDocument({ email: 'a@example.test' }));
      expect(res.status).toBe(404);
      expect(res.body).toEqual(NOT_FOUND);
    });
  });

  describe('DELETE /organizations/:name', () => {
    it('lets the owner delete its organization: 204, then 404, and its token stops working', async () => {
      const fixture = await seedOrganization(g.h, 'doomed');
      const res = await api(g.h, 'delete', `/organizations/${fixture.organization}`, fixture.organizationToken);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      const show = await api(g.h, 'get', `/organizations/${fixture.organization}`, g.h.adminToken);
      expect(show.status).toBe(404);
      expect(show.body).toEqual(NOT_FOUND);
      expect((await api(g.h, 'get', `/workspaces/${fixture.workspaceId}`, g.h.adminToken)).status).toBe(404);
      const again = await api(g.h, 'delete', `/organizations/${fixture.organization}`, g.h.adminToken);
      expect(again.status).toBe(404);
      expect((await api(g.h, 'get', '/organizations', fixture.organizationToken)).status).toBe(401);
    });

    it('lets the site admin delete an organization', async () => {
      const name = await createOrganization(g.h, uniqueName('admin-deleted'));
      expect((await api(g.h, 'delete', `/organizations/${name}`, g.h.adminToken)).status).toBe(204);
      expect((await api(g.h, 'get', `/organizations/${name}`, g.h.adminToken)).status).toBe(404);
    });

    it('answers 404 to a team token and to another organization, and deletes nothing', async () => {
      const byTeam = await api(g.h, 'delete', `/organizations/${g.acme.organization}`, g.acmeTeamToken);
      expect(byTeam.status).toBe(404);
      expect(byTeam.body).toEqual(NOT_FOUND);
      const byOther = await api(g.h, 'delete', `/organizations/${g.acme.organization}`, g.other.organizationToken);
      expect(byOther.status).toBe(404);
      expect(byOther.body).toEqual(NOT_FOUND);
      expect((await api(g.h, 'get', `/organizations/${g.acme.organization}`, g.h.adminToken)).status).toBe(200);
    });
  });
});
