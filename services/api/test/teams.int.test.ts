import { beforeAll, describe, expect, it } from '@jest/globals';
import { api, createTeam, createTeamToken, JSON_API, seedOrganization } from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { NO_ACCESS, teamDocument } from './teams-and-tokens/documents.ts';
import { useTeamsAndTokens } from './teams-and-tokens/setup.ts';

describe('teams, tokens and team access', () => {
  const g = useTeamsAndTokens();

  describe('teams', () => {
    describe('POST /organizations/:name/teams', () => {
      it('lets the owner create a team (201) with default organization access', async () => {
        const res = await api(
          g.h,
          'post',
          `/organizations/${g.acme.organization}/teams`,
          g.acme.organizationToken,
          teamDocument({ name: 'developers' }),
        );
        expect(res.status).toBe(201);
        expect(res.headers['content-type']).toContain(JSON_API);
        expect(res.body.data.type).toBe('teams');
        expect(res.body.data.id).toMatch(/^team-/);
        expect(res.body.data.attributes.name).toBe('developers');
        expect(res.body.data.attributes['organization-access']).toEqual(NO_ACCESS);
        expect(res.body.data.relationships.organization.data).toEqual({ type: 'organizations', id: g.acme.organization });
        expect(res.body.data.links.self).toBe(`/api/v2/teams/${res.body.data.id}`);
      });

      it('stores organization-access flags, booleans or strings', async () => {
        const res = await api(
          g.h,
          'post',
          `/organizations/${g.acme.organization}/teams`,
          g.h.adminToken,
          teamDocument({
            name: 'operators',
            'organization-access': {
              'manage-workspaces': true,
              'manage-run-tasks': 'true',
              'manage-policy-overrides': false,
              'manage-vcs-settings': true,
            },
          }),
        );
        expect(res.status).toBe(201);
        // Managing every workspace includes reading every one.
        expect(res.body.data.attributes['organization-access']).toEqual({
          ...NO_ACCESS,
          'manage-run-tasks': true,
          'manage-workspaces': true,
          'manage-vcs-settings': true,
          'read-workspaces': true,
        });
        const shown = await api(g.h, 'get', `/teams/${res.body.data.id}`, g.acme.organizationToken);
        expect(shown.body.data.attributes['organization-access']['manage-workspaces']).toBe(true);
      });

      it('answers 422 "has already been taken" for a duplicate name in the organization, but allows it elsewhere', async () => {
        const name = uniqueName('dup');
        await createTeam(g.h, g.acme.organization, g.acme.organizationToken, name);
        const res = await api(g.h, 'post', `/organizations/${g.acme.organization}/teams`, g.acme.organizationToken, teamDocument({ name }));
        expectError(res, 422, '/data/attributes/name');
        expect(res.body.errors[0].detail).toContain('has already been taken');
        const elsewhere = await api(
          g.h,
          'post',
          `/organizations/${g.other.organization}/teams`,
          g.other.organizationToken,
          teamDocument({ name }),
        );
        expect(elsewhere.status).toBe(201);
      });

      it.each([
        ['a missing name', {}, '/data/attributes/name'],
        ['an empty name', { name: '' }, '/data/attributes/name'],
        ['a numeric name', { name: 12 }, '/data/attributes/name'],
        [
          'a non-boolean access flag',
          { name: 'flags', 'organization-access': { 'manage-workspaces': 'yes' } },
          '/data/attributes/organization-access/manage-workspaces',
        ],
      ])('answers 422 with a pointer for %s', async (_label, attributes, pointer) => {
        const res = await api(
          g.h,
          'post',
          `/organizations/${g.acme.organization}/teams`,
          g.acme.organizationToken,
          teamDocument(attributes),
        );
        expectError(res, 422, pointer);
      });

      it('answers 404 to a team token and to another organization', async () => {
        const teamToken = await createTeamToken(
          g.h,
          g.acme.organizationToken,
          await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('m'), {
            'manage-workspaces': true,
            'manage-run-tasks': true,
          }),
        );
        const byTeam = await api(g.h, 'post', `/organizations/${g.acme.organization}/teams`, teamToken, teamDocument({ name: 'by-team' }));
        expectNotFound(byTeam);
        const byOther = await api(
          g.h,
          'post',
          `/organizations/${g.acme.organization}/teams`,
          g.other.organizationToken,
          teamDocument({ name: 'by-other' }),
        );
        expectNotFound(byOther);
        const list = await api(g.h, 'get', `/organizations/${g.acme.organization}/teams?page[size]=100`, g.acme.organizationToken);
        expect(list.body.data.map((team: { attributes: { name: string } }) => team.attributes.name)).not.toEqual(
          expect.arrayContaining(['by-team']),
        );
        expect(list.body.data.map((team: { attributes: { name: string } }) => team.attributes.name)).not.toEqual(
          expect.arrayContaining(['by-other']),
        );
      });
    });

    describe('GET /organizations/:name/teams', () => {
      it("lists the organization's teams in creation order with pagination meta", async () => {
        const org = await seedOrganization(g.h, uniqueName('listing'));
        const second = await createTeam(g.h, org.organization, org.organizationToken, 'second');
        const res = await api(g.h, 'get', `/organizations/${org.organization}/teams`, org.organizationToken);
        expect(res.status).toBe(200);
        // The owners team came with the organization.
        const [owners, ...others] = res.body.data as { id: string; attributes: { name: string } }[];
        expect(owners?.attributes.name).toBe('owners');
        expect(others.map((team) => team.id)).toEqual([org.teamId, second]);
        expect(res.body.meta.pagination['total-count']).toBe(3);
        const page = await api(g.h, 'get', `/organizations/${org.organization}/teams?page[size]=1&page[number]=3`, g.h.adminToken);
        expect(page.body.data.map((team: { id: string }) => team.id)).toEqual([second]);
        expect(page.body.meta.pagination).toMatchObject({ 'current-page': 3, 'total-pages': 3, 'next-page': null, 'prev-page': 2 });
      });

      it('answers 404 to a team token and to another organization', async () => {
        const teamToken = await createTeamToken(g.h, g.acme.organizationToken, g.acme.teamId);
        expectNotFound(await api(g.h, 'get', `/organizations/${g.acme.organization}/teams`, teamToken));
        expectNotFound(await api(g.h, 'get', `/organizations/${g.acme.organization}/teams`, g.other.organizationToken));
      });
    });

    describe('GET, PATCH and DELETE /teams/:id', () => {
      it('shows a team to its owner and the admin, 404 to others', async () => {
        for (const token of [g.acme.organizationToken, g.h.adminToken]) {
          const res = await api(g.h, 'get', `/teams/${g.acme.teamId}`, token);
          expect(res.status).toBe(200);
          expect(res.body.data.id).toBe(g.acme.teamId);
          expect(res.body.data.attributes.name).toBe(`${g.acme.organization}-team`);
        }
        expectNotFound(await api(g.h, 'get', `/teams/${g.acme.teamId}`, g.other.organizationToken));
        expectNotFound(await api(g.h, 'get', '/teams/team-doesnotexist0000', g.h.adminToken));
      });

      it('updates the name and flags; omitted flags keep their value', async () => {
        const id = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('patch'), { 'manage-run-tasks': true });
        const res = await api(
          g.h,
          'patch',
          `/teams/${id}`,
          g.acme.organizationToken,
          teamDocument({ name: 'patched', 'organization-access': { 'manage-workspaces': true } }),
        );
        expect(res.status).toBe(200);
        expect(res.body.data.attributes.name).toBe('patched');
        expect(res.body.data.attributes['organization-access']).toEqual({
          ...NO_ACCESS,
          'manage-run-tasks': true,
          'manage-workspaces': true,
          'read-workspaces': true,
        });
        const shown = await api(g.h, 'get', `/teams/${id}`, g.acme.organizationToken);
        expect(shown.body.data.attributes.name).toBe('patched');
        expect(shown.body.data.attributes['organization-access']['manage-workspaces']).toBe(true);
      });

      it('gives a team its new organization access on its next request', async () => {
        const id = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('grow'));
        const teamToken = await createTeamToken(g.h, g.acme.organizationToken, id);
        const workspace = { data: { type: 'workspaces', attributes: { name: uniqueName('team-ws') } } };
        expectNotFound(await api(g.h, 'post', `/organizations/${g.acme.organization}/workspaces`, teamToken, workspace));
        expect(
          (
            await api(
              g.h,
              'patch',
              `/teams/${id}`,
              g.acme.organizationToken,
              teamDocument({ 'organization-access': { 'manage-workspaces': true } }),
            )
          ).status,
        ).toBe(200);
        expect((await api(g.h, 'post', `/organizations/${g.acme.organization}/workspaces`, teamToken, workspace)).status).toBe(201);
      });

      it('answers 422 for a rename to a taken name or an invalid value', async () => {
        const id = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('rename'));
        const taken = await api(
          g.h,
          'patch',
          `/teams/${id}`,
          g.acme.organizationToken,
          teamDocument({ name: `${g.acme.organization}-team` }),
        );
        expectError(taken, 422, '/data/attributes/name');
        expect(taken.body.errors[0].detail).toContain('has already been taken');
        expectError(
          await api(g.h, 'patch', `/teams/${id}`, g.acme.organizationToken, teamDocument({ name: '' })),
          422,
          '/data/attributes/name',
        );
        expectError(
          await api(
            g.h,
            'patch',
            `/teams/${id}`,
            g.acme.organizationToken,
            teamDocument({ 'organization-access': { 'manage-run-tasks': 1 } }),
          ),
          422,
          '/data/attributes/organization-access/manage-run-tasks',
        );
      });

      it('answers 404 to PATCH and DELETE from another organization, changing nothing', async () => {
        expectNotFound(await api(g.h, 'patch', `/teams/${g.acme.teamId}`, g.other.organizationToken, teamDocument({ name: 'stolen' })));
        expectNotFound(await api(g.h, 'delete', `/teams/${g.acme.teamId}`, g.other.organizationToken));
        const shown = await api(g.h, 'get', `/teams/${g.acme.teamId}`, g.acme.organizationToken);
        expect(shown.body.data.attributes.name).toBe(`${g.acme.organization}-team`);
      });

      it("deletes a team: 204, then 404, and the team's token stops working", async () => {
        const id = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('gone'));
        const teamToken = await createTeamToken(g.h, g.acme.organizationToken, id);
        expect((await api(g.h, 'get', '/organizations', teamToken)).status).toBe(200);
        const res = await api(g.h, 'delete', `/teams/${id}`, g.acme.organizationToken);
        expect(res.status).toBe(204);
        expect(res.text).toBe('');
        expectNotFound(await api(g.h, 'get', `/teams/${id}`, g.acme.organizationToken));
        expectNotFound(await api(g.h, 'delete', `/teams/${id}`, g.acme.organizationToken));
        expect((await api(g.h, 'get', '/organizations', teamToken)).status).toBe(401);
      });
    });

    describe('a team token', () => {
      let teamId: string;
      let teamToken: string;
      beforeAll(async () => {
        teamId = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('powerful'), {
          'manage-workspaces': true,
          'manage-run-tasks': true,
          'manage-policy-overrides': true,
        });
        teamToken = await createTeamToken(g.h, g.acme.organizationToken, teamId);
      });

      it('cannot manage teams, not even its own (404)', async () => {
        expectNotFound(await api(g.h, 'get', `/organizations/${g.acme.organization}/teams`, teamToken));
        expectNotFound(await api(g.h, 'post', `/organizations/${g.acme.organization}/teams`, teamToken, teamDocument({ name: 'nope' })));
        expectNotFound(await api(g.h, 'get', `/teams/${teamId}`, teamToken));
        expectNotFound(await api(g.h, 'patch', `/teams/${teamId}`, teamToken, teamDocument({ name: 'renamed-by-itself' })));
        expectNotFound(await api(g.h, 'delete', `/teams/${teamId}`, teamToken));
        expectNotFound(await api(g.h, 'get', `/teams/${g.acme.teamId}`, teamToken));
        const shown = await api(g.h, 'get', `/teams/${teamId}`, g.acme.organizationToken);
        expect(shown.status).toBe(200);
        expect(shown.body.data.attributes.name).not.toBe('renamed-by-itself');
      });

      it('cannot manage team tokens (404)', async () => {
        expectNotFound(await api(g.h, 'post', `/teams/${teamId}/authentication-token`, teamToken));
        expectNotFound(await api(g.h, 'get', `/teams/${teamId}/authentication-token`, teamToken));
        expectNotFound(await api(g.h, 'delete', `/teams/${teamId}/authentication-token`, teamToken));
        expect((await api(g.h, 'get', '/organizations', teamToken)).status).toBe(200);
      });
    });
  });
});
