import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { OutboxEvent, Run } from '@runtasks/shared/db';
import { type Harness, startHarness } from '../../../test/support/harness.ts';
import { api, createOrganization, createOrganizationToken, createRun, createWorkspace, JSON_API } from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { runDocument } from './runs/helpers.ts';
import { useRunsApi } from './runs/setup.ts';

describe('runs API', () => {
  const g = useRunsApi();

  describe('POST /runs', () => {
    it('creates a pending run (201) with defaults', async () => {
      const res = await api(g.h, 'post', '/runs', g.acme.organizationToken, runDocument(g.acme.workspaceId));
      expect(res.status).toBe(201);
      expect(res.headers['content-type']).toContain(JSON_API);
      const run = res.body.data;
      expect(run.type).toBe('runs');
      expect(run.id).toMatch(/^run-[A-Za-z0-9]{16}$/);
      expect(run.attributes).toMatchObject({
        status: 'pending',
        message: 'Queued manually via the API',
        source: 'tfe-api',
        'is-destroy': false,
        'plan-only': false,
        'auto-apply': false,
        'has-changes': false,
        actions: { 'is-cancelable': true, 'is-confirmable': false, 'is-discardable': true, 'is-force-cancelable': false },
      });
      // An object (go-tfe decodes it into a struct): a run may be queued for planning from its creation.
      expect(run.attributes['status-timestamps']).toEqual({ 'plan-queueable-at': run.attributes['created-at'] });
      expect(run.relationships.workspace.data).toEqual({ type: 'workspaces', id: g.acme.workspaceId });
      expect(run.relationships.plan.data.id).toMatch(/^plan-/);
      expect(run.relationships['configuration-version'].data).toBeNull();
      expect(run.relationships['task-stages'].data).toEqual([]);
      expect(run.links.self).toBe(`/api/v2/runs/${run.id}`);
    });

    it('stores the given attributes and configuration version', async () => {
      // An uploaded configuration version of this workspace (written directly: the upload flow has its own tests).
      const cvId = `cv-${uniqueName('stored')
        .replace(/[^A-Za-z0-9]/g, '')
        .padEnd(16, '0')
        .slice(0, 16)}`;
      await g.h.orm.em.fork().execute(
        `insert into configuration_versions (id, workspace_id, status, status_timestamps, auto_queue_runs, speculative, created_at, updated_at)
           values (?, ?, 'uploaded', '{}', false, false, now(), now())`,
        [cvId, g.acme.workspaceId],
      );
      const res = await api(g.h, 'post', '/runs', g.acme.organizationToken, {
        data: {
          type: 'runs',
          attributes: { message: 'custom', 'plan-only': true, 'is-destroy': 'true', 'auto-apply': true, 'policy-paths': ['x'] },
          relationships: {
            workspace: { data: { type: 'workspaces', id: g.acme.workspaceId } },
            'configuration-version': { data: { type: 'configuration-versions', id: cvId } },
          },
        },
      });
      expect(res.status).toBe(201);
      expect(res.body.data.attributes).toMatchObject({ message: 'custom', 'plan-only': true, 'is-destroy': true, 'auto-apply': true });
      // An attribute this service does not know is ignored, as HCP ignores unknown attributes.
      expect(res.body.data.attributes).not.toHaveProperty('policy-paths');
      expect(res.body.data.attributes.actions['is-confirmable']).toBe(false);
      expect(res.body.data.relationships['configuration-version'].data).toEqual({ type: 'configuration-versions', id: cvId });
    });

    it("defaults auto-apply to the workspace's setting", async () => {
      const workspaceId = await createWorkspace(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('auto'));
      await api(g.h, 'patch', `/workspaces/${workspaceId}`, g.acme.organizationToken, {
        data: { type: 'workspaces', attributes: { 'auto-apply': true } },
      });
      const inherited = await api(g.h, 'post', '/runs', g.acme.organizationToken, runDocument(workspaceId));
      expect(inherited.body.data.attributes['auto-apply']).toBe(true);
      const overridden = await api(g.h, 'post', '/runs', g.acme.organizationToken, runDocument(workspaceId, { 'auto-apply': false }));
      expect(overridden.body.data.attributes['auto-apply']).toBe(false);
    });

    it('records a run.created outbox event in the same transaction, unpublished', async () => {
      const runId = await createRun(g.h, g.acme.organizationToken, g.acme.workspaceId);
      const events = await g.h.orm.em.fork().find(OutboxEvent, { aggregateId: runId });
      expect(events).toHaveLength(1);
      expect(events[0]!.topic).toBe('run.created');
      expect(events[0]!.payload).toEqual({ runId });
      expect(events[0]!.publishedAt).toBeNull();
    });

    it('lets the site admin, a managing team and teams with runs plan or apply create runs', async () => {
      for (const token of [g.h.adminToken, g.managerToken, g.plannerToken, g.applierToken]) {
        const res = await api(g.h, 'post', '/runs', token, runDocument(g.acme.workspaceId));
        expect(res.status).toBe(201);
        expect(res.body.data.attributes.status).toBe('pending');
      }
    });

    it('takes the apply permission to ask for auto-apply: 422 on the attribute for a team with runs plan, nothing created', async () => {
      const before = await g.h.orm.em.fork().count(Run, { workspace: g.acme.workspaceId });
      const refused = await api(g.h, 'post', '/runs', g.plannerToken, runDocument(g.acme.workspaceId, { 'auto-apply': true }));
      expectError(refused, 422, '/data/attributes/auto-apply');
      expect(await g.h.orm.em.fork().count(Run, { workspace: g.acme.workspaceId })).toBe(before);
      // Without it, or with it false, the same team queues runs; a team that may apply gets its auto-apply.
      for (const attributes of [{}, { 'auto-apply': false }]) {
        const queued = await api(g.h, 'post', '/runs', g.plannerToken, runDocument(g.acme.workspaceId, attributes));
        expect(queued.status).toBe(201);
        expect(queued.body.data.attributes['auto-apply']).toBe(false);
      }
      for (const token of [g.applierToken, g.managerToken, g.acme.organizationToken]) {
        const applying = await api(g.h, 'post', '/runs', token, runDocument(g.acme.workspaceId, { 'auto-apply': true }));
        expect(applying.status).toBe(201);
        expect(applying.body.data.attributes['auto-apply']).toBe(true);
      }
    });

    it('answers 403 naming the permission to a team with runs read; 404 to a team without access and another organization', async () => {
      const before = await g.h.orm.em.fork().count(Run, { workspace: g.acme.workspaceId });
      const reader = expectError(await api(g.h, 'post', '/runs', g.readerToken, runDocument(g.acme.workspaceId)), 403);
      expect(reader.detail).toContain('the "plan" or "apply" runs permission');
      for (const token of [g.outsiderToken, g.other.organizationToken]) {
        expectNotFound(await api(g.h, 'post', '/runs', token, runDocument(g.acme.workspaceId)));
      }
      expectNotFound(await api(g.h, 'post', '/runs', g.acme.organizationToken, runDocument(g.other.workspaceId)));
      expectNotFound(await api(g.h, 'post', '/runs', g.h.adminToken, runDocument('ws-missing0000000000')));
      expect(await g.h.orm.em.fork().count(Run, { workspace: g.acme.workspaceId })).toBe(before);
    });

    it.each([
      ['a missing workspace relationship', { data: { type: 'runs', attributes: {}, relationships: {} } }, '/data/relationships/workspace'],
      [
        'a workspace relationship of the wrong type',
        { data: { type: 'runs', relationships: { workspace: { data: { type: 'teams', id: 'ws-x' } } } } },
        '/data/relationships/workspace/data/type',
      ],
      [
        'a non-boolean plan-only',
        {
          data: {
            type: 'runs',
            attributes: { 'plan-only': 'maybe' },
            relationships: { workspace: { data: { type: 'workspaces', id: 'ws-x' } } },
          },
        },
        '/data/attributes/plan-only',
      ],
      [
        'a numeric message',
        { data: { type: 'runs', attributes: { message: 7 }, relationships: { workspace: { data: { type: 'workspaces', id: 'ws-x' } } } } },
        '/data/attributes/message',
      ],
      [
        'a plan-json that is not an object',
        {
          data: {
            type: 'runs',
            attributes: { 'plan-json': [1, 2] },
            relationships: { workspace: { data: { type: 'workspaces', id: 'ws-x' } } },
          },
        },
        '/data/attributes/plan-json',
      ],
      [
        'a document of the wrong type',
        { data: { type: 'workspaces', relationships: { workspace: { data: { type: 'workspaces', id: 'ws-x' } } } } },
        '/data/type',
      ],
    ])('answers 422 with a pointer for %s', async (_label, document, pointer) => {
      expectError(await api(g.h, 'post', '/runs', g.acme.organizationToken, document), 422, pointer);
    });
  });

  describe('POST /runs without Redis', () => {
    let offline: Harness;
    beforeAll(async () => {
      // Nothing listens on port 1: any Redis call would fail or hang the request.
      offline = await startHarness({ env: { REDIS_URL: 'redis://127.0.0.1:1/0' } });
    });
    afterAll(async () => {
      await offline.close();
    });

    // With its operations the API would also publish the run's job at once, where Redis is there
    // (services/worker/test/outbox-relay.int.test.ts); the run and its event never wait for it.
    it('creates runs with Redis unreachable: the run and its outbox event are in PostgreSQL', async () => {
      const organization = await createOrganization(offline, 'offline');
      const token = await createOrganizationToken(offline, organization);
      const workspaceId = await createWorkspace(offline, organization, token, 'offline-ws');
      const res = await api(offline, 'post', '/runs', token, runDocument(workspaceId));
      expect(res.status).toBe(201);
      expect(res.body.data.attributes.status).toBe('pending');
      expect(await offline.orm.em.fork().count(OutboxEvent, { aggregateId: res.body.data.id, publishedAt: null })).toBe(1);
    });
  });
});
