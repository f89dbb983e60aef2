import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { RunTask } from '@runtasks/shared';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expectError, uniqueName } from '../../../test/support/assertions.ts';
import { api, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { freePort } from '../../../test/support/processes.ts';
import { opensslHmac } from '../../../test/support/signatures.ts';

/** One request as the task server received it: the raw body bytes, before any parsing. */
interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

type Reply = { status: number; headers?: Record<string, string>; body?: string } | 'hang';

/** A real task server on an ephemeral loopback port that records every connection and request. */
interface TaskServer {
  url: string;
  port: number;
  requests: ReceivedRequest[];
  connections: number;
  reply: (request: ReceivedRequest) => Reply;
  close(): Promise<void>;
}

const servers: TaskServer[] = [];

async function startTaskServer(reply: (request: ReceivedRequest) => Reply = () => ({ status: 200 })): Promise<TaskServer> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const received: ReceivedRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      state.requests.push(received);
      const answer = state.reply(received);
      if (answer === 'hang') return;
      res.writeHead(answer.status, answer.headers).end(answer.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  const state: TaskServer = {
    url: `http://127.0.0.1:${port}/hooks/verify`,
    port,
    requests: [],
    connections: 0,
    reply,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  server.on('connection', () => {
    state.connections += 1;
  });
  servers.push(state);
  return state;
}

/** What a task server does with the signature: answers 401 unless it was made with `key`. */
function requireSignature(key: string): (request: ReceivedRequest) => Reply {
  return (request) => {
    const expected = Buffer.from(createHmac('sha512', key).update(request.body).digest('hex'));
    const given = Buffer.from(String(request.headers['x-tfc-task-signature'] ?? ''));
    return given.length === expected.length && timingSafeEqual(given, expected) ? { status: 200 } : { status: 401, body: 'bad signature' };
  };
}

const taskDocument = (attributes: Record<string, unknown>) => ({
  data: { type: 'tasks', attributes: { name: uniqueName('task'), category: 'task', ...attributes } },
});

const countTasks = (h: Harness): Promise<number> => h.orm.em.fork().count(RunTask, {});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

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
        access_token: 'test-token',
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

describe('run task verification timeout', () => {
  let h: Harness;
  let org: Fixture;
  beforeAll(async () => {
    h = await startHarness({ env: { TASK_VERIFICATION_TIMEOUT_SECONDS: '1' } });
    org = await seedOrganization(h, 'verify-timeout');
  });
  afterAll(async () => {
    await h.close();
  });

  it('answers 422 "did not answer in time" when the endpoint never answers, and stores nothing', async () => {
    expect(h.config.taskVerificationTimeoutSeconds).toBe(1);
    const server = await startTaskServer(() => 'hang');
    const before = await countTasks(h);
    const started = Date.now();
    const res = await api(h, 'post', `/organizations/${org.organization}/tasks`, org.organizationToken, taskDocument({ url: server.url }));
    const error = expectError(res, 422, '/data/attributes/url');
    expect(error.detail).toContain('did not answer in time');
    expect(Date.now() - started).toBeLessThan(8_000);
    await eventually(async () => (server.requests.length === 1 ? true : undefined));
    expect(await countTasks(h)).toBe(before);
  });
});

describe('run task verification with the default (empty) destination allowlist', () => {
  let h: Harness;
  let org: Fixture;
  beforeAll(async () => {
    h = await startHarness({ env: { TASK_DESTINATION_ALLOWLIST: '' } });
    org = await seedOrganization(h, 'verify-guarded');
  });
  afterAll(async () => {
    await h.close();
  });

  it('treats an empty TASK_DESTINATION_ALLOWLIST as unset', () => {
    expect(h.config.taskDestinationAllowlist).toEqual([]);
  });

  it.each([
    ['an IP literal', (port: number) => `http://127.0.0.1:${port}/hook`],
    ['a name that resolves to loopback', (port: number) => `http://localhost:${port}/hook`],
  ])('refuses a loopback task URL given as %s, without connecting to it', async (_label, urlFor) => {
    const server = await startTaskServer();
    const before = await countTasks(h);
    const res = await api(
      h,
      'post',
      `/organizations/${org.organization}/tasks`,
      org.organizationToken,
      taskDocument({ url: urlFor(server.port), 'hmac-key': 'k' }),
    );
    const error = expectError(res, 422, '/data/attributes/url');
    expect(error.detail).toContain('is not allowed');
    expect(error.detail).toContain('TASK_DESTINATION_ALLOWLIST');
    expect(server.connections).toBe(0);
    expect(server.requests).toHaveLength(0);
    expect(await countTasks(h)).toBe(before);
  });
});
