import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { configurationArchive } from '../../../test/support/archives.ts';
import { api, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/** The configuration these uploads carry. */
const NULL_RESOURCE = 'resource "null_resource" "example" {}\n';

describe('what go-tfe’s own run task tests need', () => {
  let h: Harness;
  let taskServer: Server;
  let taskUrl: string;
  beforeAll(async () => {
    h = await startHarness({ env: { CONFIGURATION_VERSION_MAX_BYTES: '65536', CONFIGURATION_UPLOAD_URL_TTL_SECONDS: '60' } });
    taskServer = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200).end());
    });
    await new Promise<void>((resolve) => taskServer.listen(0, '127.0.0.1', resolve));
    taskUrl = `http://127.0.0.1:${(taskServer.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    await new Promise((resolve) => taskServer.close(resolve));
    await h.close();
  });

  describe('organizations', () => {
    it('stores the settings go-tfe sends, ignores attributes HCP does not have, and deletes everything of an organization', async () => {
      const name = uniqueName('gotfe');
      const created = await api(h, 'post', '/organizations', h.adminToken, {
        data: {
          type: 'organizations',
          attributes: { name, email: 'a@example.test', 'cost-estimation-enabled': true, 'session-timeout': 60, 'no-such-setting': true },
        },
      });
      expect(created.status).toBe(201);
      expect(created.body.data.attributes).toMatchObject({ 'cost-estimation-enabled': true, 'session-timeout': 60 });
      expect(created.body.data.attributes).not.toHaveProperty('no-such-setting');
      const token = (await api(h, 'post', `/organizations/${name}/authentication-token`, h.adminToken)).body.data.attributes
        .token as string;
      const workspace = await api(h, 'post', `/organizations/${name}/workspaces`, token, {
        data: { type: 'workspaces', attributes: { name: 'w' } },
      });
      expect(workspace.status).toBe(201);
      expect((await api(h, 'delete', `/organizations/${name}`, h.adminToken)).status).toBe(204);
      expectNotFound(await api(h, 'get', `/organizations/${name}`, h.adminToken));
      const [left] = await h.orm.em
        .fork()
        .execute<{ n: string }[]>(`select count(*) as n from workspaces where id = ?`, [workspace.body.data.id]);
      expect(Number(left?.n)).toBe(0);
    });
  });

  describe('site-admin feature sets and subscriptions', () => {
    it('lists feature sets filtered by q, for the site admin only', async () => {
      const business = await api(h, 'get', '/admin/feature-sets?q=Business', h.adminToken);
      expect(business.status).toBe(200);
      expect(business.body.data.length).toBeGreaterThan(0);
      expect(business.body.data[0]).toMatchObject({ type: 'feature-sets', attributes: { name: 'Business', 'global-run-tasks': true } });
      const trial = await api(h, 'get', '/admin/feature-sets?q=trial', h.adminToken);
      expect(trial.body.data[0].attributes).toMatchObject({ name: 'Trial', 'global-run-tasks': false });
      expect(trial.body.meta.pagination['total-count']).toBe(1);
      const f = await seedOrganization(h, uniqueName('fsnoadmin'));
      expectNotFound(await api(h, 'get', '/admin/feature-sets', f.organizationToken));
    });

    it.each([
      ['Business', true],
      ['Trial', false],
    ])('a %s subscription drives the entitlement set and global-configuration', async (plan, global) => {
      const f = await seedOrganization(h, uniqueName(`sub-${plan.toLowerCase()}`));
      const sets = await api(h, 'get', `/admin/feature-sets?q=${plan}`, h.adminToken);
      const subscription = await api(h, 'post', `/admin/organizations/${f.organization}/subscription`, h.adminToken, {
        data: {
          type: 'subscription',
          attributes: { 'runs-ceiling': 10, 'contract-start-at': new Date().toISOString() },
          relationships: { 'feature-set': { data: { type: 'feature-sets', id: sets.body.data[0].id } } },
        },
      });
      expect(subscription.status).toBe(201);
      const entitlements = await api(h, 'get', `/organizations/${f.organization}/entitlement-set`, f.organizationToken);
      expect(entitlements.body.data.attributes['global-run-tasks']).toBe(global);
      expect(entitlements.body.data.attributes['private-run-tasks']).toBe(false);
      const task = await api(h, 'post', `/organizations/${f.organization}/tasks`, f.organizationToken, {
        data: {
          type: 'tasks',
          attributes: {
            name: 't',
            url: taskUrl,
            category: 'task',
            'global-configuration': { enabled: true, stages: ['post_plan', 'pre_plan'], 'enforcement-level': 'mandatory' },
          },
        },
      });
      expect(task.status).toBe(201);
      if (global) {
        expect(task.body.data.attributes['global-configuration']).toEqual({
          enabled: true,
          stages: ['post_plan', 'pre_plan'],
          'enforcement-level': 'mandatory',
        });
      } else {
        expect(task.body.data.attributes).not.toHaveProperty('global-configuration');
      }
    });

    it('refuses a subscription to an unknown feature set, and from anyone but the site admin', async () => {
      const f = await seedOrganization(h, uniqueName('subbad'));
      const body = (id: string) => ({
        data: { type: 'subscription', relationships: { 'feature-set': { data: { type: 'feature-sets', id } } } },
      });
      expectError(
        await api(h, 'post', `/admin/organizations/${f.organization}/subscription`, h.adminToken, body('fs-nope')),
        422,
        '/data/relationships/feature-set/data/id',
      );
      expectNotFound(await api(h, 'post', `/admin/organizations/${f.organization}/subscription`, f.organizationToken, body('fs-business')));
    });
  });

  describe('configuration versions', () => {
    let f: Fixture;
    beforeAll(async () => {
      f = await seedOrganization(h, uniqueName('cv'));
    });

    async function createVersion(attributes: Record<string, unknown> = { 'auto-queue-runs': false }) {
      const res = await api(h, 'post', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken, {
        data: { type: 'configuration-versions', attributes },
      });
      expect(res.status).toBe(201);
      return res.body.data as { id: string; attributes: Record<string, unknown> };
    }

    /** The upload URL is absolute; the PUT carries no Authorization header at all, as in go-tfe. */
    const put = (uploadUrl: unknown, body: Buffer) => {
      const url = new URL(String(uploadUrl));
      return h.http.put(url.pathname).set('Content-Type', 'application/octet-stream').send(body);
    };

    it('create → tokenless PUT → uploaded; a run on it has its stages in the creation response flow', async () => {
      const version = await createVersion();
      expect(version.attributes).toMatchObject({ status: 'pending', 'auto-queue-runs': false, speculative: false });
      expect(String(version.attributes['upload-url'])).toMatch(/^http:\/\/runtasks\.test\/api\/v2\/uploads\/configuration-versions\//);
      const archive = configurationArchive(NULL_RESOURCE);
      expect((await put(version.attributes['upload-url'], archive)).status).toBe(200);
      const status = await eventually(async () => {
        const res = await api(h, 'get', `/configuration-versions/${version.id}`, f.organizationToken);
        return res.body.data.attributes.status === 'uploaded' ? res.body.data.attributes : undefined;
      });
      expect(status['status-timestamps']).toHaveProperty('uploaded-at');

      // Two workspace tasks on the default stage, as go-tfe's task-stage tests set up.
      for (const name of ['alpha', 'beta']) {
        const task = await api(h, 'post', `/organizations/${f.organization}/tasks`, f.organizationToken, {
          data: { type: 'tasks', attributes: { name: `${name}-${version.id.slice(3, 9)}`, url: taskUrl, category: 'task' } },
        });
        const association = await api(h, 'post', `/workspaces/${f.workspaceId}/tasks`, f.organizationToken, {
          data: {
            type: 'workspace-tasks',
            attributes: { 'enforcement-level': 'advisory' },
            relationships: { task: { data: { type: 'tasks', id: task.body.data.id } } },
          },
        });
        expect(association.status).toBe(201);
      }
      const run = await api(h, 'post', '/runs', f.organizationToken, {
        data: {
          type: 'runs',
          relationships: {
            workspace: { data: { type: 'workspaces', id: f.workspaceId } },
            'configuration-version': { data: { type: 'configuration-versions', id: version.id } },
          },
        },
      });
      expect(run.status).toBe(201);
      expect(run.body.data.relationships['configuration-version'].data).toEqual({ type: 'configuration-versions', id: version.id });
      // Read at once, exactly as go-tfe does right after POST /runs.
      const withStages = await api(h, 'get', `/runs/${run.body.data.id}?include=task_stages`, f.organizationToken);
      expect(withStages.body.included).toHaveLength(1);
      const stages = await api(h, 'get', `/runs/${run.body.data.id}/task-stages`, f.organizationToken);
      expect(stages.body.data).toHaveLength(1);
      expect(stages.body.data[0].attributes.stage).toBe('post_plan');
      const stage = await api(h, 'get', `/task-stages/${stages.body.data[0].id}?include=task_results`, f.organizationToken);
      expect(stage.body.included).toHaveLength(2);
      for (const result of stage.body.included) {
        expect(result.type).toBe('task-results');
        expect(result.attributes['workspace-task-id']).toMatch(/^wstask-/);
        expect(result.attributes['task-name']).toMatch(/^(alpha|beta)-/);
      }

      const download = await h.http
        .get(`/api/v2/configuration-versions/${version.id}/download`)
        .set('Authorization', `Bearer ${f.organizationToken}`)
        .buffer(true)
        .parse((res, done) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => done(null, Buffer.concat(chunks)));
        });
      expect(download.status).toBe(200);
      expect(Buffer.compare(download.body as Buffer, archive)).toBe(0);
      expect((await h.http.get(`/api/v2/configuration-versions/${version.id}/download`)).status).toBe(401);
    });

    it('lists versions per workspace, newest first', async () => {
      const first = await createVersion();
      const second = await createVersion();
      const list = await api(h, 'get', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken);
      expect(list.status).toBe(200);
      const ids = list.body.data.map((item: { id: string }) => item.id);
      expect(ids.indexOf(second.id)).toBeLessThan(ids.indexOf(first.id));
      expect(list.body.data[0].attributes['upload-url']).toBeNull();
    });

    it('upload edge cases: wrong URL → 404, oversize → 413, not gzip → 422, gzip but not tar → errored', async () => {
      const version = await createVersion();
      const url = String(version.attributes['upload-url']);
      expectNotFound(await put(`${url}x`, configurationArchive(NULL_RESOURCE)));
      expect((await put(url, Buffer.alloc(70_000, 1))).status).toBe(413);
      expectError(await put(url, Buffer.from('plain text, not an archive')), 422);
      expect((await put(url, configurationArchive(NULL_RESOURCE))).status).toBe(200);
      // Uploading again replaces the archive until a run uses the version (configuration-versions.golden).
      expect((await put(url, configurationArchive(NULL_RESOURCE))).status).toBe(200);

      const broken = await createVersion();
      expectError(await put(broken.attributes['upload-url'], gzipSync(Buffer.from('not a tar archive at all'))), 422);
      const shown = await api(h, 'get', `/configuration-versions/${broken.id}`, f.organizationToken);
      expect(shown.body.data.attributes).toMatchObject({ status: 'errored', error: 'errored' });
      expect(shown.body.data.attributes['error-message']).toMatch(/not a tar archive/);
    });

    it('an expired upload URL → 404', async () => {
      const version = await createVersion();
      await h.orm.em
        .fork()
        .execute(`update configuration_versions set upload_expires_at = now() - interval '1 second' where id = ?`, [version.id]);
      expectNotFound(await put(version.attributes['upload-url'], configurationArchive(NULL_RESOURCE)));
    });

    it('a run refuses a version that is not uploaded or belongs elsewhere', async () => {
      const pending = await createVersion();
      const runWith = (id: string) =>
        api(h, 'post', '/runs', f.organizationToken, {
          data: {
            type: 'runs',
            relationships: {
              workspace: { data: { type: 'workspaces', id: f.workspaceId } },
              'configuration-version': { data: { type: 'configuration-versions', id } },
            },
          },
        });
      expectError(await runWith(pending.id), 422, '/data/relationships/configuration-version/data/id');
      expectError(await runWith('cv-doesnotexist0000'), 422, '/data/relationships/configuration-version/data/id');
    });

    it('auto-queue-runs creates a run when the archive arrives; a speculative version makes a plan-only run', async () => {
      const version = await createVersion({ 'auto-queue-runs': true, speculative: true });
      expect((await put(version.attributes['upload-url'], configurationArchive(NULL_RESOURCE))).status).toBe(200);
      const runs = await api(h, 'get', `/workspaces/${f.workspaceId}/runs`, f.organizationToken);
      const queued = runs.body.data.find(
        (run: { relationships: { 'configuration-version': { data: { id: string } | null } } }) =>
          run.relationships['configuration-version'].data?.id === version.id,
      );
      expect(queued.attributes['plan-only']).toBe(true);
    });
  });
});
