import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, uniqueName } from '../../../test/support/assertions.ts';
import { api, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { freePort } from '../../../test/support/processes.ts';
import { opensslHmac } from '../../../test/support/signatures.ts';
import {
  type ReceivedRequest,
  type TaskServer,
  startTaskServer,
  requireSignature,
  taskDocument,
  countTasks,
} from './run-task-verification.fixtures.ts';

describe('run task verification', () => {
  let h: Harness;
  let org: Fixture;
  beforeAll(async () => {
    h = await startHarness();
    org = await seedOrganization(h, 'verify');
  });
  afterAll(async () => {
    await h.close();
  });

  const createTask = (attributes: Record<string, unknown>) =>
    api(h, 'post', `/organizations/${org.organization}/tasks`, org.organizationToken, taskDocument(attributes));

  describe('POST /organizations/:org/tasks', () => {
    it('creates the task after a 200 and sends one signed, compact verification payload', async () => {
      const server = await startTaskServer(requireSignature('s3cret-key'));
      const before = await countTasks(h);

      const res = await createTask({ url: server.url, 'hmac-key': 's3cret-key' });
      expect(res.status).toBe(201);
      expect(await countTasks(h)).toBe(before + 1);
      const shown = await api(h, 'get', `/tasks/${res.body.data.id}`, org.organizationToken);
      expect(shown.status).toBe(200);
      expect(shown.body.data.attributes.url).toBe(server.url);

      expect(server.requests).toHaveLength(1);
      const [received] = server.requests as [ReceivedRequest];
      expect(received.method).toBe('POST');
      expect(received.url).toBe('/hooks/verify');
      // The signature covers exactly the bytes that arrived, checked by openssl rather than our own code.
      const signature = received.headers['x-tfc-task-signature'];
      expect(signature).toMatch(/^[0-9a-f]{128}$/);
      expect(signature).toBe(opensslHmac('s3cret-key', received.body));
      expect(signature).not.toBe(opensslHmac('another-key', received.body));
      expect(received.headers['content-type']).toBe('application/json');
      expect(received.headers['user-agent']).toEqual(expect.stringMatching(/\S/));

      const text = received.body.toString('utf8');
      expect(JSON.stringify(JSON.parse(text))).toBe(text);
      const payload = JSON.parse(text) as Record<string, unknown>;
      expect(payload).toMatchObject({
        payload_version: 1,
        stage: 'test',
        access_token: 'test-token',
        task_result_id: 'taskrs-verification',
        capabilities: { outcomes: true },
        organization_name: org.organization,
      });
      const createdAt = payload['run_created_at'] as string;
      expect(typeof createdAt).toBe('string');
      expect(Number.isNaN(Date.parse(createdAt))).toBe(false);
      expect(createdAt.endsWith('Z')).toBe(true);
      const callback = new URL(payload['task_result_callback_url'] as string);
      expect(['http:', 'https:']).toContain(callback.protocol);
      expect(callback.href.startsWith(`${h.config.publicBaseUrl}/`)).toBe(true);
    });

    it('sends the signature header empty when the task has no key', async () => {
      const server = await startTaskServer();
      const res = await createTask({ url: server.url });
      expect(res.status).toBe(201);
      expect(server.requests).toHaveLength(1);
      expect(server.requests[0]?.headers).toHaveProperty('x-tfc-task-signature', '');
    });

    it('accepts the key spelled hmac_key and signs with it', async () => {
      const server = await startTaskServer(requireSignature('underscore-key'));
      const res = await createTask({ url: server.url, hmac_key: 'underscore-key' });
      expect(res.status).toBe(201);
      const [received] = server.requests as [ReceivedRequest];
      expect(received.headers['x-tfc-task-signature']).toBe(opensslHmac('underscore-key', received.body));
    });

    it.each([
      [202, 'HTTP 202'],
      [500, 'HTTP 500'],
      [404, 'HTTP 404'],
    ])('answers 422 and stores nothing when the endpoint answers %i', async (status, expected) => {
      const server = await startTaskServer(() => ({ status, body: 'nope' }));
      const before = await countTasks(h);
      const res = await createTask({ url: server.url, 'hmac-key': 'k' });
      const error = expectError(res, 422, '/data/attributes/url');
      expect(error.detail).toContain(expected);
      expect(error.detail).toContain(server.url);
      expect(server.requests).toHaveLength(1);
      expect(await countTasks(h)).toBe(before);
    });

    it("shows the endpoint's status and the first bytes of its answer in the 422, with the HMAC key cut out", async () => {
      const server = await startTaskServer(() => ({ status: 500, body: `boom: cannot handle key echo-me-key ${'x'.repeat(4000)}` }));
      const res = await createTask({ url: server.url, 'hmac-key': 'echo-me-key' });
      const error = expectError(res, 422, '/data/attributes/url');
      expect(error.detail).toContain('HTTP 500');
      expect(error.detail).toContain('boom: cannot handle key [redacted]');
      expect(JSON.stringify(res.body)).not.toContain('echo-me-key');
      const meta = (res.body.errors[0] as { meta: { 'http-status': number; 'response-excerpt': string } }).meta;
      expect(meta['http-status']).toBe(500);
      expect(meta['response-excerpt'].startsWith('boom: cannot handle key [redacted] xxx')).toBe(true);
      expect(meta['response-excerpt'].length).toBeLessThanOrEqual(512);
    });

    it.each([
      ['a user name and password', (port: number) => `http://user:secret@127.0.0.1:${port}/hook`],
      ['a user name', (port: number) => `http://user@127.0.0.1:${port}/hook`],
      ['an empty user name with a password', (port: number) => `https://:secret@127.0.0.1:${port}/hook`],
    ])('refuses a URL with %s at the pointer, without sending anything', async (_label, urlFor) => {
      const server = await startTaskServer();
      const before = await countTasks(h);
      const res = await createTask({ url: urlFor(server.port) });
      const error = expectError(res, 422, '/data/attributes/url');
      expect(error.detail).toContain('user name or password');
      expect(JSON.stringify(res.body)).not.toContain('secret');
      expect(server.connections).toBe(0);
      expect(await countTasks(h)).toBe(before);
    });

    it('shows a task stored with credentials before they were refused without them', async () => {
      const connection = h.orm.em.fork().getConnection();
      const [organization] = await connection.execute<{ id: string }[]>('select id from organizations where name = ?', [org.organization]);
      const id = `task-legacy${Date.now()}`;
      await connection.execute(
        `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
         values (?, ?, ?, 'https://user:s3cret@tasks.example.com/hook', 'task', true, false, '{}', 'advisory', now(), now())`,
        [id, organization?.id, uniqueName('legacy')],
      );
      const shown = await api(h, 'get', `/tasks/${id}`, org.organizationToken);
      expect(shown.status).toBe(200);
      expect(shown.body.data.attributes.url).toBe('https://tasks.example.com/hook');
      expect(JSON.stringify(shown.body)).not.toContain('s3cret');
    });

    it('answers 422 "HTTP 401" when the endpoint rejects the signature of a wrong key', async () => {
      const server = await startTaskServer(requireSignature('the-right-key'));
      const before = await countTasks(h);
      const res = await createTask({ url: server.url, 'hmac-key': 'the-wrong-key' });
      expect(expectError(res, 422, '/data/attributes/url').detail).toContain('HTTP 401');
      expect(server.requests).toHaveLength(1);
      expect(await countTasks(h)).toBe(before);
    });

    it('answers 422 "refused" when nothing listens on the port', async () => {
      // Bound, then released: nothing listens on it.
      const port = await freePort();
      const before = await countTasks(h);
      const res = await createTask({ url: `http://127.0.0.1:${port}/hook` });
      expect(expectError(res, 422, '/data/attributes/url').detail).toContain('refused');
      expect(await countTasks(h)).toBe(before);
    });

    it.each([301, 302, 307])('does not follow a %i redirect: 422 and the target gets no request', async (status) => {
      const target = await startTaskServer();
      const redirecting = await startTaskServer(() => ({ status, headers: { location: target.url } }));
      const before = await countTasks(h);
      const res = await createTask({ url: redirecting.url, 'hmac-key': 'k' });
      expect(expectError(res, 422, '/data/attributes/url').detail).toContain(`HTTP ${status}`);
      expect(redirecting.requests).toHaveLength(1);
      expect(target.requests).toHaveLength(0);
      expect(target.connections).toBe(0);
      expect(await countTasks(h)).toBe(before);
    });
  });

  describe('PATCH /tasks/:id', () => {
    const patchTask = (id: string, attributes: Record<string, unknown>) =>
      api(h, 'patch', `/tasks/${id}`, org.organizationToken, { data: { type: 'tasks', id, attributes } });

    async function seedTask(key: string | null): Promise<{ id: string; server: TaskServer }> {
      const server = await startTaskServer();
      const res = await createTask({ url: server.url, 'hmac-key': key });
      expect(res.status).toBe(201);
      expect(server.requests).toHaveLength(1);
      return { id: res.body.data.id as string, server };
    }

    it('sends no verification when only the description (or the same key) changes', async () => {
      const { id, server } = await seedTask('unchanged-key');
      const res = await patchTask(id, { description: 'just words', 'hmac-key': 'unchanged-key' });
      expect(res.status).toBe(200);
      expect(res.body.data.attributes.description).toBe('just words');
      expect(server.requests).toHaveLength(1);
      expect(server.connections).toBe(1);
    });

    it('verifies a new URL, signed with the current key, at the new URL only', async () => {
      const { id, server: old } = await seedTask('kept-key');
      const next = await startTaskServer(requireSignature('kept-key'));
      const res = await patchTask(id, { url: next.url.replace('/hooks/verify', '/moved') });
      expect(res.status).toBe(200);
      expect(res.body.data.attributes.url).toBe(next.url.replace('/hooks/verify', '/moved'));
      expect(old.requests).toHaveLength(1);
      expect(next.requests).toHaveLength(1);
      const [received] = next.requests as [ReceivedRequest];
      expect(received.url).toBe('/moved');
      expect(received.headers['x-tfc-task-signature']).toBe(opensslHmac('kept-key', received.body));
      expect(JSON.parse(received.body.toString('utf8'))).toMatchObject({ access_token: 'test-token', payload_version: 1 });
    });

    it('verifies a new key, signed with the new key, at the current URL', async () => {
      const { id, server } = await seedTask('old-key');
      server.reply = requireSignature('new-key');
      const res = await patchTask(id, { 'hmac-key': 'new-key' });
      expect(res.status).toBe(200);
      expect(server.requests).toHaveLength(2);
      const received = server.requests[1] as ReceivedRequest;
      expect(received.headers['x-tfc-task-signature']).toBe(opensslHmac('new-key', received.body));
      expect(received.headers['x-tfc-task-signature']).not.toBe(opensslHmac('old-key', received.body));
    });

    it('verifies a new URL and key together at the new URL with the new key', async () => {
      const { id, server: old } = await seedTask('first-key');
      const next = await startTaskServer(requireSignature('second-key'));
      const res = await patchTask(id, { url: next.url, hmac_key: 'second-key' });
      expect(res.status).toBe(200);
      expect(old.requests).toHaveLength(1);
      const [received] = next.requests as [ReceivedRequest];
      expect(received.headers['x-tfc-task-signature']).toBe(opensslHmac('second-key', received.body));
    });

    it('verifies removing the key with an empty signature', async () => {
      const { id, server } = await seedTask('going-away');
      const res = await patchTask(id, { 'hmac-key': null });
      expect(res.status).toBe(200);
      expect(server.requests).toHaveLength(2);
      expect(server.requests[1]?.headers).toHaveProperty('x-tfc-task-signature', '');
    });

    it('refuses a new URL with credentials at the pointer and keeps the old one', async () => {
      const { id, server } = await seedTask('cred-key');
      const res = await patchTask(id, { url: `http://user:pw@127.0.0.1:${server.port}/moved` });
      expect(expectError(res, 422, '/data/attributes/url').detail).toContain('user name or password');
      expect(server.requests).toHaveLength(1);
      const shown = await api(h, 'get', `/tasks/${id}`, org.organizationToken);
      expect(shown.body.data.attributes.url).toBe(server.url);
    });

    it('leaves the task unchanged when the verification of an update fails', async () => {
      const { id, server } = await seedTask('original-key');
      const failing = await startTaskServer(() => ({ status: 500 }));

      const moved = await patchTask(id, { url: failing.url, description: 'should not stick' });
      expect(expectError(moved, 422, '/data/attributes/url').detail).toContain('HTTP 500');
      expect(failing.requests).toHaveLength(1);
      const shown = await api(h, 'get', `/tasks/${id}`, org.organizationToken);
      expect(shown.body.data.attributes.url).toBe(server.url);
      expect(shown.body.data.attributes.description).toBeNull();

      // A rejected key change is not stored either: the next verification is still signed with the original key.
      server.reply = () => ({ status: 500 });
      const rekeyed = await patchTask(id, { 'hmac-key': 'rejected-key' });
      expect(expectError(rekeyed, 422, '/data/attributes/url').detail).toContain('HTTP 500');
      const next = await startTaskServer(requireSignature('original-key'));
      const res = await patchTask(id, { url: next.url });
      expect(res.status).toBe(200);
      const [received] = next.requests as [ReceivedRequest];
      expect(received.headers['x-tfc-task-signature']).toBe(opensslHmac('original-key', received.body));
    });
  });
});
