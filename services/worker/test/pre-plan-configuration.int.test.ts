import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { configurationArchive } from '../../../test/support/archives.ts';
import { api, eventually, seedOrganization } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startWorker, type RunningWorker } from '../src/worker.ts';

interface Seen {
  payload: Record<string, unknown>;
  withToken: number;
  withoutToken: number;
  bytes: number;
}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => resolve(body));
  });

/**
 * A pre-plan task server that downloads the run's configuration with its access token (and tries
 * once without), then calls back: what a security scanner does at pre_plan.
 */
function startScanner(seen: Seen[]): Promise<Server> {
  const server = createServer(async (req, res) => {
    const payload = JSON.parse(await readBody(req)) as Record<string, unknown>;
    res.writeHead(200).end();
    if (payload['access_token'] === 'test-token') return;
    const url = String(payload['configuration_version_download_url']);
    const token = String(payload['access_token']);
    const withToken = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
    const bytes = (await withToken.arrayBuffer()).byteLength;
    const withoutToken = await fetch(url);
    seen.push({ payload, withToken: withToken.status, withoutToken: withoutToken.status, bytes });
    await fetch(String(payload['task_result_callback_url']), {
      method: 'PATCH',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/vnd.api+json' },
      body: JSON.stringify({ data: { type: 'task-results', attributes: { status: 'passed', message: `scanned ${bytes} bytes` } } }),
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

describe('a pre-plan task reads the run’s configuration with its access token', () => {
  let h: Harness;
  let worker: RunningWorker;
  let scanner: Server;
  const seen: Seen[] = [];
  beforeAll(async () => {
    h = await startHarness({ reachableBaseUrl: true, env: { SWEEPER_INTERVAL_SECONDS: '1' } });
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
    scanner = await startScanner(seen);
  });
  afterAll(async () => {
    await worker.close();
    await new Promise((resolve) => scanner.close(resolve));
    await h.close();
  });

  it('sends configuration_version_id and a download URL that works with the token and only with it', async () => {
    const f = await seedOrganization(h, 'preplan');
    const task = await api(h, 'post', '/organizations/preplan/tasks', f.organizationToken, {
      data: {
        type: 'tasks',
        attributes: { name: 'scanner', url: `http://127.0.0.1:${(scanner.address() as AddressInfo).port}/`, category: 'task' },
      },
    });
    expect(task.status).toBe(201);
    await api(h, 'post', `/workspaces/${f.workspaceId}/tasks`, f.organizationToken, {
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': 'mandatory', stage: 'pre_plan' },
        relationships: { task: { data: { type: 'tasks', id: task.body.data.id } } },
      },
    });
    const version = await api(h, 'post', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken, {
      data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false } },
    });
    const archive = configurationArchive();
    const upload = await fetch(String(version.body.data.attributes['upload-url']), { method: 'PUT', body: archive });
    expect(upload.status).toBe(200);

    const run = await api(h, 'post', '/runs', f.organizationToken, {
      data: {
        type: 'runs',
        relationships: {
          workspace: { data: { type: 'workspaces', id: f.workspaceId } },
          'configuration-version': { data: { type: 'configuration-versions', id: version.body.data.id } },
        },
      },
    });
    expect(run.status).toBe(201);
    const visit = await eventually(async () => seen.find((entry) => entry.payload['run_id'] === run.body.data.id), 15_000);
    expect(visit.payload['stage']).toBe('pre_plan');
    expect(visit.payload['configuration_version_id']).toBe(version.body.data.id);
    expect(visit.payload['configuration_version_download_url']).toBe(
      `${h.config.publicBaseUrl}/api/v2/configuration-versions/${version.body.data.id}/download`,
    );
    expect(visit.payload).not.toHaveProperty('plan_json_api_url');
    expect(visit.withToken).toBe(200);
    expect(visit.bytes).toBe(archive.length);
    expect(visit.withoutToken).toBe(401);
    const stage = await eventually(async () => {
      const stages = await api(h, 'get', `/runs/${run.body.data.id}/task-stages`, f.organizationToken);
      return stages.body.data[0]?.attributes.status === 'passed' ? stages.body.data[0] : undefined;
    });
    expect(stage.attributes.stage).toBe('pre_plan');
  });
});
