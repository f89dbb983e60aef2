import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { uniqueName, type Response } from '../../../test/support/assertions.ts';
import {
  api,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Golden tests of the `permissions` objects on organizations, workspaces, runs and teams: each object is
 * compared whole with HCP's keys (as go-tfe decodes them), and each `true` or `false` that matters is
 * checked against what the same caller's request is then answered.
 */

const ORGANIZATION_OWNER = {
  'can-create-team': true,
  'can-create-workspace': true,
  'can-create-workspace-migration': false,
  'can-deploy-no-code-modules': false,
  'can-destroy': true,
  'can-manage-auditing': false,
  'can-manage-no-code-modules': false,
  'can-manage-run-tasks': true,
  'can-traverse': true,
  'can-update': true,
  'can-update-api-token': true,
  'can-update-oauth': false,
  'can-update-sentinel': false,
};

const WORKSPACE_ADMIN = {
  'can-destroy': true,
  'can-force-unlock': true,
  'can-lock': true,
  'can-manage-run-tasks': true,
  'can-queue-apply': true,
  'can-queue-destroy': true,
  'can-queue-run': true,
  'can-read-settings': true,
  'can-unlock': true,
  'can-update': true,
  'can-update-variable': false,
  'can-force-delete': true,
};

const WORKSPACE_PLAN = {
  ...WORKSPACE_ADMIN,
  'can-destroy': false,
  'can-force-delete': false,
  'can-force-unlock': false,
  'can-lock': false,
  'can-manage-run-tasks': false,
  'can-queue-apply': false,
  'can-unlock': false,
  'can-update': false,
};

const WORKSPACE_READ = { ...WORKSPACE_PLAN, 'can-queue-run': false, 'can-queue-destroy': false };

const runPermissions = (mayApply: boolean) => ({
  'can-apply': mayApply,
  'can-cancel': mayApply,
  'can-discard': mayApply,
  'can-force-cancel': mayApply,
  'can-force-execute': mayApply,
});

const permissionsOf = (res: Response): unknown => {
  expect(res.status).toBe(200);
  return res.body.data.attributes.permissions;
};

describe('permissions', () => {
  let h: Harness;
  let acme: Fixture;
  /** A team with "plan" access to acme's workspace, "read" access to a second one, and none to a third. */
  let planTeamToken: string;
  let readWorkspace: string;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('perm'));
    readWorkspace = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('read'));
    await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('hidden'));
    await grantWorkspace(h, acme.organizationToken, acme.teamId, acme.workspaceId, { access: 'plan' });
    await grantWorkspace(h, acme.organizationToken, acme.teamId, readWorkspace, { access: 'read' });
    planTeamToken = await createTeamToken(h, acme.organizationToken, acme.teamId);
  });
  afterAll(async () => {
    await h.close();
  });

  describe('organizations', () => {
    it('gives owners every right this service has, on show, list, create and update', async () => {
      expect(permissionsOf(await api(h, 'get', `/organizations/${acme.organization}`, acme.organizationToken))).toEqual(ORGANIZATION_OWNER);
      expect(permissionsOf(await api(h, 'get', `/organizations/${acme.organization}`, h.adminToken))).toEqual(ORGANIZATION_OWNER);
      const listed = await api(h, 'get', '/organizations', acme.organizationToken);
      expect(listed.body.data.map((organization: { attributes: { permissions: unknown } }) => organization.attributes.permissions)).toEqual(
        [ORGANIZATION_OWNER],
      );
      const name = uniqueName('perm-created');
      const created = await api(h, 'post', '/organizations', h.adminToken, {
        data: { type: 'organizations', attributes: { name, email: `${name}@example.test` } },
      });
      expect(created.status).toBe(201);
      expect(created.body.data.attributes.permissions).toEqual(ORGANIZATION_OWNER);
      const updated = await api(h, 'patch', `/organizations/${name}`, h.adminToken, {
        data: { type: 'organizations', attributes: { email: `changed-${name}@example.test` } },
      });
      expect(permissionsOf(updated)).toEqual(ORGANIZATION_OWNER);
    });

    it('shows a team its organization-level rights, and they hold', async () => {
      const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('runtaskers'), {
        'manage-run-tasks': true,
      });
      const token = await createTeamToken(h, acme.organizationToken, teamId);
      expect(permissionsOf(await api(h, 'get', `/organizations/${acme.organization}`, token))).toEqual({
        ...ORGANIZATION_OWNER,
        'can-create-team': false,
        'can-create-workspace': false,
        'can-destroy': false,
        'can-update': false,
        'can-update-api-token': false,
      });
      // can-manage-run-tasks: true, can-create-team and can-create-workspace: false.
      expect((await api(h, 'get', `/organizations/${acme.organization}/tasks`, token)).status).toBe(200);
      const team = await api(h, 'post', `/organizations/${acme.organization}/teams`, token, {
        data: { type: 'teams', attributes: { name: uniqueName('refused') } },
      });
      expect(team.status).toBe(404);
      const workspace = await api(h, 'post', `/organizations/${acme.organization}/workspaces`, token, {
        data: { type: 'workspaces', attributes: { name: uniqueName('refused') } },
      });
      expect(workspace.status).toBe(404);
      // The plan team manages no run tasks: the list is closed to it.
      expect(permissionsOf(await api(h, 'get', `/organizations/${acme.organization}`, planTeamToken))).toMatchObject({
        'can-manage-run-tasks': false,
      });
      expect((await api(h, 'get', `/organizations/${acme.organization}/tasks`, planTeamToken)).status).toBe(404);
    });
  });

  describe('workspaces', () => {
    it('gives owners every right on show, create, update and list', async () => {
      expect(permissionsOf(await api(h, 'get', `/workspaces/${acme.workspaceId}`, acme.organizationToken))).toEqual(WORKSPACE_ADMIN);
      const created = await api(h, 'post', `/organizations/${acme.organization}/workspaces`, acme.organizationToken, {
        data: { type: 'workspaces', attributes: { name: uniqueName('perm-ws') } },
      });
      expect(created.status).toBe(201);
      expect(created.body.data.attributes.permissions).toEqual(WORKSPACE_ADMIN);
      const updated = await api(h, 'patch', `/workspaces/${created.body.data.id}`, acme.organizationToken, {
        data: { type: 'workspaces', attributes: { description: 'changed' } },
      });
      expect(permissionsOf(updated)).toEqual(WORKSPACE_ADMIN);
      const listed = await api(h, 'get', `/organizations/${acme.organization}/workspaces`, acme.organizationToken);
      for (const workspace of listed.body.data) expect(workspace.attributes.permissions).toEqual(WORKSPACE_ADMIN);
    });

    it("lists a team's workspaces each with its own access, and the rights hold", async () => {
      const listed = await api(h, 'get', `/organizations/${acme.organization}/workspaces`, planTeamToken);
      expect(listed.status).toBe(200);
      const byId = Object.fromEntries(
        listed.body.data.map((workspace: { id: string; attributes: { permissions: unknown } }) => [
          workspace.id,
          workspace.attributes.permissions,
        ]),
      );
      expect(byId).toEqual({ [acme.workspaceId]: WORKSPACE_PLAN, [readWorkspace]: WORKSPACE_READ });
      expect(permissionsOf(await api(h, 'get', `/workspaces/${readWorkspace}`, planTeamToken))).toEqual(WORKSPACE_READ);

      // can-queue-run: true where the team plans, false where it reads (and a 403 says what it lacks).
      expect((await api(h, 'post', '/runs', planTeamToken, runDocument(acme.workspaceId))).status).toBe(201);
      expect((await api(h, 'post', '/runs', planTeamToken, runDocument(readWorkspace))).status).toBe(403);
      // can-update: false.
      const update = await api(h, 'patch', `/workspaces/${acme.workspaceId}`, planTeamToken, {
        data: { type: 'workspaces', attributes: { description: 'not mine' } },
      });
      expect(update.status).toBe(404);
    });

    it('shows can-manage-run-tasks from a custom grant, and it holds', async () => {
      const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('custom'));
      const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('custom'));
      await grantWorkspace(h, acme.organizationToken, teamId, workspaceId, { access: 'custom', runs: 'apply', 'run-tasks': true });
      const token = await createTeamToken(h, acme.organizationToken, teamId);
      expect(permissionsOf(await api(h, 'get', `/workspaces/${workspaceId}`, token))).toEqual({
        ...WORKSPACE_PLAN,
        'can-manage-run-tasks': true,
        'can-queue-apply': true,
        'can-lock': true,
        'can-unlock': true,
      });
      expect((await api(h, 'get', `/workspaces/${workspaceId}/tasks`, token)).status).toBe(200);
      expect((await api(h, 'get', `/workspaces/${acme.workspaceId}/tasks`, planTeamToken)).status).toBe(404);
    });
  });

  describe('runs', () => {
    it('shows can-apply where the caller may apply, on create, show and list, and it holds', async () => {
      const created = await api(h, 'post', '/runs', acme.organizationToken, runDocument(acme.workspaceId));
      expect(created.status).toBe(201);
      expect(created.body.data.attributes.permissions).toEqual(runPermissions(true));
      const runId = created.body.data.id as string;
      expect(permissionsOf(await api(h, 'get', `/runs/${runId}`, acme.organizationToken))).toEqual(runPermissions(true));

      const asPlanner = await api(h, 'get', `/runs/${runId}`, planTeamToken);
      expect(permissionsOf(asPlanner)).toEqual(runPermissions(false));
      const listed = await api(h, 'get', `/workspaces/${acme.workspaceId}/runs`, planTeamToken);
      expect(listed.status).toBe(200);
      for (const run of listed.body.data) expect(run.attributes.permissions).toEqual(runPermissions(false));
      const planned = await api(h, 'post', '/runs', planTeamToken, runDocument(acme.workspaceId));
      expect(planned.body.data.attributes.permissions).toEqual(runPermissions(false));

      // can-discard and can-cancel false: the team's request is refused, naming the permission it lacks.
      for (const action of ['apply', 'cancel', 'discard']) {
        const refused = await api(h, 'post', `/runs/${runId}/actions/${action}`, planTeamToken);
        expect([refused.status, refused.body.errors[0].detail]).toEqual([
          403,
          `This token may read the run but may not ${action} it: that takes the "apply" runs permission on the workspace.`,
        ]);
      }
      // The owner's may: its cancel is accepted.
      expect(
        (
          await api(
            h,
            'post',
            `/runs/${await createRun(h, acme.organizationToken, acme.workspaceId)}/actions/cancel`,
            acme.organizationToken,
          )
        ).status,
      ).toBe(202);
    });
  });

  describe('teams', () => {
    it('shows owners can-destroy on create, show, list and update, and it holds', async () => {
      const created = await api(h, 'post', `/organizations/${acme.organization}/teams`, acme.organizationToken, {
        data: { type: 'teams', attributes: { name: uniqueName('perm-team') } },
      });
      expect(created.status).toBe(201);
      const owner = { 'can-destroy': true, 'can-update-membership': false };
      expect(created.body.data.attributes.permissions).toEqual(owner);
      const id = created.body.data.id as string;
      expect(permissionsOf(await api(h, 'get', `/teams/${id}`, acme.organizationToken))).toEqual(owner);
      const updated = await api(h, 'patch', `/teams/${id}`, acme.organizationToken, {
        data: { type: 'teams', attributes: { name: uniqueName('renamed') } },
      });
      expect(permissionsOf(updated)).toEqual(owner);
      const listed = await api(h, 'get', `/organizations/${acme.organization}/teams`, acme.organizationToken);
      for (const team of listed.body.data)
        expect(team.attributes.permissions).toEqual(team.attributes.name === 'owners' ? { ...owner, 'can-destroy': false } : owner);
      expect((await api(h, 'delete', `/teams/${id}`, acme.organizationToken)).status).toBe(204);
    });
  });
});

function runDocument(workspaceId: string) {
  return { data: { type: 'runs', attributes: {}, relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } } } };
}
