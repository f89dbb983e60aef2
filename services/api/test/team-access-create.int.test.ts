import { beforeAll, describe, expect, it } from '@jest/globals';
import { api, createTeam, createTeamToken, createWorkspace, grantWorkspace, JSON_API } from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { teamWorkspaceDocument, teamWorkspaceDocumentFor } from './teams-and-tokens/documents.ts';
import { useTeamsAndTokens } from './teams-and-tokens/setup.ts';

describe('teams, tokens and team access', () => {
  const g = useTeamsAndTokens();

  describe('team workspace access', () => {
    let workspaceId: string;
    let otherWorkspaceId: string;
    beforeAll(async () => {
      workspaceId = await createWorkspace(g.h, g.acme.organization, g.acme.organizationToken, 'access-ws');
      otherWorkspaceId = g.other.workspaceId;
    });

    describe('POST /team-workspaces', () => {
      it.each([
        ['read', 'read', false],
        ['plan', 'plan', false],
        ['write', 'apply', false],
        ['admin', 'apply', true],
      ])('grants %s access with runs=%s and run-tasks=%s implied', async (access, runs, runTasks) => {
        const teamId = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName(`access-${access}`));
        const res = await api(
          g.h,
          'post',
          '/team-workspaces',
          g.acme.organizationToken,
          teamWorkspaceDocument(teamId, workspaceId, { access }),
        );
        expect(res.status).toBe(201);
        expect(res.headers['content-type']).toContain(JSON_API);
        expect(res.body.data.type).toBe('team-workspaces');
        expect(res.body.data.id).toMatch(/^tws-/);
        expect(res.body.data.attributes).toMatchObject({ access, runs, 'run-tasks': runTasks });
        expect(res.body.data.relationships.team.data).toEqual({ type: 'teams', id: teamId });
        expect(res.body.data.relationships.workspace.data).toEqual({ type: 'workspaces', id: workspaceId });
      });

      it('grants custom access with the permissions as given, defaulting to read', async () => {
        const teamId = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('custom'));
        const res = await api(
          g.h,
          'post',
          '/team-workspaces',
          g.acme.organizationToken,
          teamWorkspaceDocument(teamId, workspaceId, { access: 'custom', runs: 'plan', 'run-tasks': 'true' }),
        );
        expect(res.status).toBe(201);
        expect(res.body.data.attributes).toMatchObject({ access: 'custom', runs: 'plan', 'run-tasks': true });

        const bareTeam = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('bare'));
        const bare = await api(g.h, 'post', '/team-workspaces', g.h.adminToken, teamWorkspaceDocument(bareTeam, workspaceId));
        expect(bare.status).toBe(201);
        expect(bare.body.data.attributes).toMatchObject({ access: 'custom', runs: 'read', 'run-tasks': false });
      });

      it('answers 422 when the team already has access to the workspace', async () => {
        const teamId = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('twice'));
        await grantWorkspace(g.h, g.acme.organizationToken, teamId, workspaceId, { access: 'read' });
        const res = await api(
          g.h,
          'post',
          '/team-workspaces',
          g.acme.organizationToken,
          teamWorkspaceDocument(teamId, workspaceId, { access: 'admin' }),
        );
        expectError(res, 422, '/data/relationships/workspace');
        const list = await api(g.h, 'get', `/team-workspaces?filter[team][id]=${teamId}`, g.acme.organizationToken);
        expect(list.body.data).toHaveLength(1);
        expect(list.body.data[0].attributes.access).toBe('read');
      });

      it('answers 404 for a workspace or a team of another organization', async () => {
        const teamId = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('cross'));
        expectNotFound(
          await api(
            g.h,
            'post',
            '/team-workspaces',
            g.acme.organizationToken,
            teamWorkspaceDocument(teamId, otherWorkspaceId, { access: 'read' }),
          ),
        );
        expectNotFound(
          await api(g.h, 'post', '/team-workspaces', g.h.adminToken, teamWorkspaceDocument(teamId, otherWorkspaceId, { access: 'read' })),
        );
        expectNotFound(
          await api(
            g.h,
            'post',
            '/team-workspaces',
            g.acme.organizationToken,
            teamWorkspaceDocument(g.other.teamId, workspaceId, { access: 'read' }),
          ),
        );
        expectNotFound(
          await api(
            g.h,
            'post',
            '/team-workspaces',
            g.other.organizationToken,
            teamWorkspaceDocument(teamId, workspaceId, { access: 'read' }),
          ),
        );
        expectNotFound(
          await api(
            g.h,
            'post',
            '/team-workspaces',
            g.acme.organizationToken,
            teamWorkspaceDocument(teamId, 'ws-missing0000000000', { access: 'read' }),
          ),
        );
      });

      it('answers 404 to a team token, even one that manages workspaces', async () => {
        const teamId = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('self-grant'), {
          'manage-workspaces': true,
        });
        const teamToken = await createTeamToken(g.h, g.acme.organizationToken, teamId);
        expectNotFound(
          await api(g.h, 'post', '/team-workspaces', teamToken, teamWorkspaceDocument(teamId, workspaceId, { access: 'admin' })),
        );
      });

      it.each([
        ['an unknown access level', teamWorkspaceDocumentFor({ access: 'owner' }), '/data/attributes/access'],
        ['an unknown runs level', teamWorkspaceDocumentFor({ access: 'custom', runs: 'destroy' }), '/data/attributes/runs'],
        ['a non-boolean run-tasks', teamWorkspaceDocumentFor({ access: 'custom', 'run-tasks': 'sometimes' }), '/data/attributes/run-tasks'],
        [
          'a missing team relationship',
          { data: { type: 'team-workspaces', attributes: {}, relationships: { workspace: { data: { type: 'workspaces', id: 'ws-x' } } } } },
          '/data/relationships/team',
        ],
        [
          'a workspace relationship of the wrong type',
          {
            data: {
              type: 'team-workspaces',
              attributes: {},
              relationships: { team: { data: { type: 'teams', id: 'team-x' } }, workspace: { data: { type: 'runs', id: 'ws-x' } } },
            },
          },
          '/data/relationships/workspace/data/type',
        ],
      ])('answers 422 with a pointer for %s', async (_label, document, pointer) => {
        expectError(await api(g.h, 'post', '/team-workspaces', g.acme.organizationToken, document), 422, pointer);
      });
    });
  });
});
