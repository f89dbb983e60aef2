import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { type RouteDef } from '../../src/routes/define.ts';
import { configurationArchive } from '../../../../test/support/archives.ts';
import { api, JSON_API } from '../../../../test/support/fixtures.ts';
import { idsOf } from '../../../../test/support/assertions.ts';
import { MISSING, ORG_A } from './params.ts';
import { taskServer } from './bodies.ts';
import { CALLBACK_ROUTES, fill, keyOf, MAX_UPLOAD_BYTES, takesBody, TOKEN_ROUTES } from './routes.ts';
import { type IsolationContext } from './setup.ts';

/** Callback routes, configuration versions, the upload URL, and the check that nothing changed. */
export function describeBeyondTheMatrix(g: IsolationContext): void {
  const { snapshot, call, uploadPath, upload, download, textOf, missingVariants, expectNotFound, expectUnauthorized, garbage } = g;
  describe.each(CALLBACK_ROUTES.map((route) => [keyOf(route), route] as const))('%s (task access token only)', (_key, route) => {
    it('no token → 401, for real and for missing ids', async () => {
      expectUnauthorized(await call(route, g.real), 'real ids');
      for (const variant of missingVariants(route)) expectUnauthorized(await call(route, variant.values), variant.label);
    });

    it('garbage, revoked and non-bearer credentials → the same 401', async () => {
      for (const [label, header] of garbage()) expectUnauthorized(await call(route, g.real, header), label);
    });

    it('every API token (owners of A and B, the site admin, a team) → the same 401', async () => {
      const tokens: [string, string][] = [
        ["A's owner", g.a.organizationToken],
        ["B's owner", g.b.organizationToken],
        ['the site admin', g.h.adminToken],
        ["A's team without permissions", g.noPermissionTeamToken],
      ];
      for (const [label, token] of tokens) {
        expectUnauthorized(await call(route, g.real, `Bearer ${token}`), label);
        for (const variant of missingVariants(route)) {
          expectUnauthorized(await call(route, variant.values, `Bearer ${token}`), `${label}, ${variant.label}`);
        }
      }
    });

    it("another result's live access token (organization B's) → 401", async () => {
      expectUnauthorized(await call(route, g.real, `Bearer ${g.otherTaskToken}`), "B's task token");
      for (const variant of missingVariants(route)) {
        expectUnauthorized(await call(route, variant.values, `Bearer ${g.otherTaskToken}`), `B's task token, ${variant.label}`);
      }
    });

    if (takesBody(route)) {
      it('no token → 401 whatever the body (auth runs before body handling)', async () => {
        const path = `/api/v2${fill(route, g.real)}`;
        const method = route.method.toLowerCase() as 'post' | 'patch' | 'put';
        expectUnauthorized(await g.h.http[method](path).set('Content-Type', JSON_API).send('{"data": '), 'malformed JSON');
        expectUnauthorized(await g.h.http[method](path).set('Content-Type', 'text/plain').send('hello'), 'text/plain');
        expectUnauthorized(await g.h.http[method](path).set('Content-Type', JSON_API).send('{"data": {}}'), 'invalid document');
      });
    }
  });

  describe('configuration versions beyond the matrix', () => {
    it('a team that may read runs (not plan them) lists, reads and downloads versions, but creates none (403 naming the permission)', async () => {
      const list = await api(g.h, 'get', `/workspaces/${g.real.workspace_id}/configuration-versions`, g.readTeamToken);
      expect(list.status).toBe(200);
      expect(idsOf(list)).toContain(g.real.configuration_version_id);
      const show = await api(g.h, 'get', `/configuration-versions/${g.real.configuration_version_id}`, g.readTeamToken);
      expect(show.body.data.attributes).toMatchObject({ status: 'uploaded', 'upload-url': null });
      const res = await download(g.real.configuration_version_id, `Bearer ${g.readTeamToken}`);
      expect(res.status).toBe(200);
      expect(Buffer.compare(res.body as Buffer, g.archive)).toBe(0);
      const created = await call(
        TOKEN_ROUTES.find((route) => keyOf(route) === 'POST /workspaces/:workspace_id/configuration-versions') as RouteDef,
        g.real,
        `Bearer ${g.readTeamToken}`,
      );
      // It reads the workspace, so it is told what it lacks, and nothing is created.
      expect({ status: created.status, detail: created.body.errors?.[0]?.detail }).toEqual({
        status: 403,
        detail:
          'This token may read the workspace but may not upload configuration versions to it: that takes the "plan" or "apply" runs permission on the workspace.',
      });
      const after = await api(g.h, 'get', `/workspaces/${g.real.workspace_id}/configuration-versions`, g.readTeamToken);
      expect(idsOf(after)).toEqual(idsOf(list));
    });

    it('a task access token downloads the version of its own run only; it reads nothing else of it', async () => {
      const own = await download(g.real.configuration_version_id, `Bearer ${g.versionTaskToken}`);
      expect(own.status).toBe(200);
      expect(own.headers['content-type']).toBe('application/octet-stream');
      expect(Buffer.compare(own.body as Buffer, g.archive)).toBe(0);
      for (const [label, token, id] of [
        ["A's run without the version", g.plainTaskToken, g.real.configuration_version_id],
        ["A's run with the version, a missing version", g.versionTaskToken, MISSING.configuration_version_id],
        ["A's run with the version, A's pending version", g.versionTaskToken, g.pendingVersionId],
      ] as const) {
        const res = await download(id, `Bearer ${token}`);
        expect({ label, status: res.status, text: textOf(res) }).toEqual({ label, status: 404, text: g.notFoundText });
      }
      // The version's other routes take API tokens only.
      for (const path of [
        `/configuration-versions/${g.real.configuration_version_id}`,
        `/workspaces/${g.real.workspace_id}/configuration-versions`,
      ]) {
        expectUnauthorized(await api(g.h, 'get', path, g.versionTaskToken), `task token on ${path}`);
      }
    });

    it("the owner's download is the archive byte for byte; a pending version has nothing to download (404)", async () => {
      const res = await download(g.real.configuration_version_id, `Bearer ${g.a.organizationToken}`);
      expect(res.status).toBe(200);
      expect(res.headers['content-disposition']).toBe(`attachment; filename="${g.real.configuration_version_id}.tar.gz"`);
      expect(Buffer.compare(res.body as Buffer, g.archive)).toBe(0);
      const pending = await download(g.pendingVersionId, `Bearer ${g.a.organizationToken}`);
      expect({ status: pending.status, text: textOf(pending) }).toEqual({ status: 404, text: g.notFoundText });
    });
  });

  describe('the public upload URL (a bearer capability)', () => {
    const credentials = (): [string, string | undefined][] => [
      ['no Authorization header', undefined],
      ["A's owner", `Bearer ${g.a.organizationToken}`],
      ["B's owner", `Bearer ${g.b.organizationToken}`],
      ['the site admin', `Bearer ${g.h.adminToken}`],
      ['garbage bearer token', `Bearer rtk_${randomBytes(32).toString('base64url')}`],
    ];

    it('unknown, malformed, used and expired upload tokens → the same 404 as any missing resource, whatever the credentials', async () => {
      const wrong: [string, string][] = [
        ['an unknown token of the right shape', MISSING.upload_token],
        ['a fresh random token', `rtup_${randomBytes(32).toString('base64url')}`],
        ['the valid token with one character more', `${g.real.upload_token}x`],
        ['the valid token less its last character', g.real.upload_token.slice(0, -1)],
        ['the valid token in upper case', g.real.upload_token.toUpperCase()],
        ['a short token', 'rtup_x'],
        ['a token with a percent-encoded NUL', `${g.real.upload_token}%00`],
        ['a broken percent escape', '%E0%A4%A'],
        ["a live API token (A's owner's) as the upload token", g.a.organizationToken],
        ["an archived version's token", g.usedUploadToken],
        ['an expired token', g.expiredUploadToken],
      ];
      for (const [label, token] of wrong) {
        for (const [credential, authorization] of credentials()) {
          expectNotFound(await upload(token, g.archive, authorization), `${label}, ${credential}`);
        }
      }
      // The expired version was never uploaded; the archived one stays archived.
      const versions = await api(g.h, 'get', `/workspaces/${g.real.workspace_id}/configuration-versions`, g.a.organizationToken);
      expect(versions.body.data.map((version: { attributes: { status: string } }) => version.attributes.status).sort()).toEqual([
        'archived',
        'pending',
        'pending',
        'uploaded',
      ]);
    });

    it('a valid URL refuses what is no archive without being used up: oversize → 413, not gzip → 422', async () => {
      const tooLarge = await upload(g.real.upload_token, Buffer.alloc(MAX_UPLOAD_BYTES + 1, 0x1f));
      expect({ status: tooLarge.status, title: tooLarge.body.errors?.[0]?.title }).toEqual({ status: 413, title: 'payload too large' });
      for (const bytes of [Buffer.from('plain text, not an archive'), Buffer.alloc(0), Buffer.from('{"data":{}}')]) {
        const res = await upload(g.real.upload_token, bytes);
        expect({ status: res.status, type: res.headers['content-type'] }).toEqual({ status: 422, type: expect.stringContaining(JSON_API) });
      }
      const show = await api(g.h, 'get', `/configuration-versions/${g.pendingVersionId}`, g.a.organizationToken);
      expect(show.body.data.attributes.status).toBe('pending');
    });

    it('other methods on an upload URL answer alike for a valid and an unknown token', async () => {
      for (const method of ['get', 'post', 'patch', 'delete'] as const) {
        const valid = await g.h.http[method](uploadPath(g.real.upload_token));
        const unknown = await g.h.http[method](uploadPath(MISSING.upload_token));
        g.requestsSent += 2;
        expect({ method, status: valid.status, text: valid.text }).toEqual({ method, status: unknown.status, text: unknown.text });
        expect(valid.status).toBeGreaterThanOrEqual(400);
        expect(valid.status).toBeLessThan(500);
      }
    });
  });

  // Declared after every failing request above (only the one successful upload below comes later).
  describe('afterwards', () => {
    it('the failing requests changed nothing', async () => {
      expect(g.requestsSent).toBeGreaterThan(TOKEN_ROUTES.length * 5);
      expect(await snapshot()).toBe(g.stateBefore);
      // No failing request reached the point of verifying a task URL.
      expect(taskServer.requests).toBe(g.taskRequestsBefore);
      // And the data the matrix aimed at is all still there for its owner.
      const run = await api(g.h, 'get', `/runs/${g.real.run_id}`, g.a.organizationToken);
      expect(run.status).toBe(200);
      expect(run.body.data.attributes.status).toBe('pending');
      const teams = await api(g.h, 'get', `/organizations/${ORG_A}/teams`, g.a.organizationToken);
      const ownersTeam = (teams.body.data as { id: string; attributes: { name: string } }[]).find(
        (team) => team.attributes.name === 'owners',
      );
      expect(idsOf(teams).sort()).toEqual([ownersTeam?.id, g.a.teamId, g.grantedTeamId, g.allAccessTeamId].sort());
      const access = await api(g.h, 'get', `/team-workspaces/${g.real.id}`, g.a.organizationToken);
      expect(access.body.data.attributes.access).toBe('read');
      const task = await api(g.h, 'get', `/tasks/${g.real.task_id}`, g.a.organizationToken);
      expect(task.body.data.attributes).toMatchObject({ name: 'isolation-task', description: null, enabled: true });
      expect(task.body.data.relationships['workspace-tasks'].data).toEqual([{ id: g.real.workspace_task_id, type: 'workspace-tasks' }]);
      const association = await api(
        g.h,
        'get',
        `/workspaces/${g.real.workspace_id}/tasks/${g.real.workspace_task_id}`,
        g.a.organizationToken,
      );
      expect(association.body.data.attributes).toMatchObject({ 'enforcement-level': 'advisory', stages: ['post_plan'] });
      const stage = await api(g.h, 'get', `/task-stages/${g.real.task_stage_id}`, g.a.organizationToken);
      expect(stage.body.data.attributes.status).toBe('pending');
      const outcomes = await api(g.h, 'get', `/task-results/${g.real.task_result_id}/outcomes`, g.a.organizationToken);
      expect(idsOf(outcomes)).toEqual([g.real.outcome_id]);
      const result = await api(g.h, 'get', `/task-results/${g.real.task_result_id}`, g.a.organizationToken);
      expect(result.body.data.attributes).toMatchObject({ status: 'pending', message: null, 'task-result-outcomes-count': 0 });
      const attempts = await api(g.h, 'get', `/task-results/${g.real.task_result_id}/delivery-attempts`, g.a.organizationToken);
      expect(attempts.body.data.map((attempt: { attributes: Record<string, unknown> }) => attempt.attributes)).toEqual([
        expect.objectContaining({ attempt: 1, 'http-status': 200 }),
      ]);
      const version = await api(g.h, 'get', `/configuration-versions/${g.real.configuration_version_id}`, g.a.organizationToken);
      expect(version.body.data.attributes.status).toBe('uploaded');
      const pending = await api(g.h, 'get', `/configuration-versions/${g.pendingVersionId}`, g.a.organizationToken);
      expect(pending.body.data.attributes.status).toBe('pending');
      const organization = await api(g.h, 'get', `/organizations/${ORG_A}/entitlement-set`, g.a.organizationToken);
      expect(organization.body.data.attributes['global-run-tasks']).toBe(true);
    });
  });

  // After the snapshot comparison: the one request here that succeeds changes the pending version.
  describe('the upload URL, used last', () => {
    it('a token-less PUT of a real archive works, and again (replacing it) while no run uses the version', async () => {
      const first = configurationArchive('resource "null_resource" "uploaded-first" {}\n');
      const next = configurationArchive('resource "null_resource" "uploaded-last" {}\n');
      const res = await upload(g.real.upload_token, first);
      expect({ status: res.status, text: res.text }).toEqual({ status: 200, text: '' });
      // Credentials change nothing: the URL's secret is what authorizes it.
      const again = await upload(g.real.upload_token, next, `Bearer ${g.b.organizationToken}`);
      expect({ status: again.status, text: again.text }).toEqual({ status: 200, text: '' });
      const show = await api(g.h, 'get', `/configuration-versions/${g.pendingVersionId}`, g.a.organizationToken);
      expect(show.body.data.attributes.status).toBe('uploaded');
      expect(show.body.data.attributes['status-timestamps']).toHaveProperty('uploaded-at');
      const downloaded = await download(g.pendingVersionId, `Bearer ${g.a.organizationToken}`);
      expect(Buffer.compare(downloaded.body as Buffer, next)).toBe(0);
      // Only that version changed (auto-queue-runs is off: no run either).
      const changed = (await snapshot()).split('\n');
      const before = g.stateBefore.split('\n');
      expect(changed.filter((line) => !line.startsWith('configuration_versions:'))).toEqual(
        before.filter((line) => !line.startsWith('configuration_versions:')),
      );
      expect(changed.find((line) => line.startsWith('configuration_versions:'))).not.toBe(
        before.find((line) => line.startsWith('configuration_versions:')),
      );
    });
  });
}
