import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer } from 'node:http';
import { type AddressInfo } from 'node:net';
import { expectError } from '../../../test/support/assertions.ts';
import { api, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startTaskServer, taskDocument, countTasks } from './run-task-verification.fixtures.ts';

/**
 * A task server that calls back during the verification, as some real ones do: it reads the request,
 * PATCHes the callback URL with the access token it was given (before answering), and answers 200 only
 * when that PATCH got 200, else 500 with the callback's status, as a server that lets the failure
 * escape does. `acceptsStage` decides what it takes for the test: then it answers 200 at once.
 */
async function startCallingBackServer(
  acceptsStage: string | undefined,
): Promise<{ url: string; callbacks: { status: number; body: string }[]; close(): Promise<void> }> {
  const callbacks: { status: number; body: string }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const payload = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, string>;
      if (payload['access_token'] === 'test-token' && payload['stage'] === acceptsStage) {
        res.writeHead(200).end('test received');
        return;
      }
      const body = JSON.stringify({ data: { type: 'task-results', attributes: { status: 'passed', message: 'auto-approved' } } });
      fetch(payload['task_result_callback_url'] ?? '', {
        method: 'PATCH',
        headers: { authorization: `Bearer ${payload['access_token']}`, 'content-type': 'application/vnd.api+json' },
        body,
      })
        .then(async (answer) => {
          callbacks.push({ status: answer.status, body: await answer.text() });
          res.writeHead(answer.status === 200 ? 200 : 500).end(`callback answered ${answer.status}`);
        })
        .catch((error: unknown) => res.writeHead(500).end(String(error)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    callbacks,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('run task verification with a task server that calls back', () => {
  let h: Harness;
  let org: Fixture;
  beforeAll(async () => {
    h = await startHarness({ reachableBaseUrl: true });
    org = await seedOrganization(h, 'verify-callback');
  });
  afterAll(async () => {
    await h.close();
  });

  const createTaskAt = (url: string) =>
    api(h, 'post', `/organizations/${org.organization}/tasks`, org.organizationToken, taskDocument({ url, 'hmac-key': 'cb-key' }));

  it('sends stage "test", so a server that checks the token and the stage answers 200 without calling back', async () => {
    const server = await startCallingBackServer('test');
    try {
      const res = await createTaskAt(server.url);
      expect(res.status).toBe(201);
      expect(server.callbacks).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it('answers the verification callback with 200 and changes nothing, whatever stage the server looked for', async () => {
    // This server takes nothing for the test: it calls back during the verification.
    const server = await startCallingBackServer(undefined);
    const before = await countTasks(h);
    const results = async (): Promise<number> =>
      h.orm.em
        .fork()
        .getConnection()
        .execute<{ count: string }[]>('select count(*) as count from task_results')
        .then((rows) => Number(rows[0]?.count));
    const resultsBefore = await results();
    try {
      const res = await createTaskAt(server.url);
      expect(res.status).toBe(201);
      expect(server.callbacks).toHaveLength(1);
      expect(server.callbacks[0]?.status).toBe(200);
      expect(JSON.parse(server.callbacks[0]?.body ?? '{}')).toMatchObject({ data: { id: 'taskrs-verification', type: 'task-results' } });
      expect(await countTasks(h)).toBe(before + 1);
      expect(await results()).toBe(resultsBefore);
    } finally {
      await server.close();
    }
  });

  it.each(['post_plan', 'pre_apply', undefined])(
    'answers the test token 200 on the verification callback for a body with stage %s',
    async (stage) => {
      const res = await h.http
        .patch('/api/v2/task-results/taskrs-verification/callback')
        .set('Authorization', 'Bearer test-token')
        .set('Content-Type', 'application/vnd.api+json')
        .send({ data: { type: 'task-results', attributes: { status: 'failed', ...(stage ? { stage } : {}) } } });
      expect(res.status).toBe(200);
    },
  );

  it('still refuses the test token on any other result, and any other token on the verification result', async () => {
    const other = await h.http
      .patch('/api/v2/task-results/taskrs-other/callback')
      .set('Authorization', 'Bearer test-token')
      .set('Content-Type', 'application/vnd.api+json')
      .send({ data: { type: 'task-results', attributes: { status: 'passed' } } });
    expect(other.status).toBe(401);
    const wrong = await h.http
      .patch('/api/v2/task-results/taskrs-verification/callback')
      .set('Authorization', 'Bearer not-the-test-token')
      .set('Content-Type', 'application/vnd.api+json')
      .send({ data: { type: 'task-results', attributes: { status: 'passed' } } });
    expect(wrong.status).toBe(401);
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
