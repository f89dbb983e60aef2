import { afterEach, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { fileURLToPath } from 'node:url';
import { startRunTaskServer, type RecordedRequest, type RunTaskServer, type RunTaskServerOptions } from './server.ts';

const KEY = 'example-hmac-key';
const TOKEN = 'run-token-0123456789';
const PLAN_PATH = '/api/v2/plans/plan-abc/json-output';
const CALLBACK_PATH = '/api/v2/task-results/taskrs-abc/callback';

/** Polls until `check` returns a value or the deadline passes; never a fixed sleep. */
async function eventually<T>(check: () => T | undefined | Promise<T | undefined>, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

interface StubRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Stands in for the service: serves the plan JSON and records the task result callbacks. */
interface EngineStub {
  url: string;
  requests: StubRequest[];
  /** Arrivals at the stub and test-side events, in order. */
  events: string[];
  /** Statuses for successive callbacks (then 200). */
  callbackStatuses: number[];
  planStatus: number;
  close(): Promise<void>;
}

const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  while (closers.length > 0) await closers.pop()?.();
});

async function startEngineStub(): Promise<EngineStub> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      stub.requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      stub.events.push(`${req.method} ${req.url}`);
      if (req.method === 'GET' && req.url === PLAN_PATH) {
        const plan = {
          format_version: '1.2',
          resource_changes: [
            { address: 'null_resource.a', change: { actions: ['create'] } },
            { address: 'null_resource.b', change: { actions: ['delete', 'create'] } },
            { address: 'null_resource.c', change: { actions: ['no-op'] } },
          ],
        };
        res.writeHead(stub.planStatus, { 'content-type': 'application/json' }).end(JSON.stringify(plan));
      } else if (req.method === 'PATCH' && req.url === CALLBACK_PATH) {
        res.writeHead(stub.callbackStatuses.shift() ?? 200).end();
      } else {
        res.writeHead(404).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const stub: EngineStub = {
    url: `http://127.0.0.1:${address.port}`,
    requests: [],
    events: [],
    callbackStatuses: [],
    planStatus: 200,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  closers.push(stub.close);
  return stub;
}

async function startTaskServer(options: RunTaskServerOptions): Promise<RunTaskServer> {
  const server = await startRunTaskServer({ port: 0, host: '127.0.0.1', ...options });
  closers.push(server.close);
  return server;
}

function payload(stub: EngineStub, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    payload_version: 1,
    stage: 'post_plan',
    access_token: TOKEN,
    capabilities: { outcomes: true },
    configuration_version_download_url: `${stub.url}/api/v2/configuration-versions/cv-abc/download`,
    configuration_version_id: 'cv-abc',
    is_speculative: false,
    organization_name: 'acme',
    plan_json_api_url: `${stub.url}${PLAN_PATH}`,
    run_app_url: `${stub.url}/app/acme/workspaces/network/runs/run-abc`,
    run_created_at: '2025-01-01T00:00:00.000Z',
    run_created_by: 'alice',
    run_id: 'run-abc',
    run_message: 'Triggered via API',
    task_result_callback_url: `${stub.url}${CALLBACK_PATH}`,
    task_result_enforcement_level: 'mandatory',
    task_result_id: 'taskrs-abc',
    workspace_app_url: `${stub.url}/app/acme/workspaces/network`,
    workspace_id: 'ws-abc',
    workspace_name: 'network',
    workspace_working_directory: '',
    ...overrides,
  };
}

const sign = (body: string, key: string): string => createHmac('sha512', key).update(body).digest('hex');

/** POSTs the exact bytes of `body` (compact JSON, as the service sends it). */
async function post(server: RunTaskServer, body: string, signature: string, contentType = 'application/json'): Promise<number> {
  const response = await fetch(`${server.url}/`, {
    method: 'POST',
    headers: { 'content-type': contentType, 'x-tfc-task-signature': signature },
    body,
  });
  await response.text();
  return response.status;
}

/** Waits until the server has finished with its only request (answered, every callback made). */
async function finished(server: RunTaskServer): Promise<RecordedRequest> {
  expect(server.requests).toHaveLength(1);
  return eventually(() => (server.requests[0]?.done ? server.requests[0] : undefined));
}

const patches = (stub: EngineStub): StubRequest[] => stub.requests.filter((r) => r.method === 'PATCH');

describe('example run task server', () => {
  it('acknowledges a signed request, reads the plan with the bearer token, then PATCHes a JSON:API result', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY });
    const body = JSON.stringify(payload(stub));

    expect(await post(server, body, sign(body, KEY))).toBe(200);

    const patch = await eventually(() => patches(stub)[0]);
    expect(patch.headers['authorization']).toBe(`Bearer ${TOKEN}`);
    expect(patch.headers['content-type']).toBe('application/vnd.api+json');
    const sent = JSON.parse(patch.body) as {
      data: { type: string; attributes: Record<string, unknown>; relationships: { outcomes: { data: Array<Record<string, unknown>> } } };
    };
    expect(sent.data.type).toBe('task-results');
    expect(sent.data.attributes).toEqual({ status: 'passed', message: expect.any(String), url: expect.stringMatching(/^http:\/\//) });
    expect(sent.data.attributes['message']).toContain('2 resource changes');
    const outcomes = sent.data.relationships.outcomes.data;
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]).toEqual({
      type: 'task-result-outcomes',
      attributes: {
        'outcome-id': 'EXAMPLE-1',
        description: expect.any(String),
        body: expect.stringContaining('## Example run task'),
        url: expect.any(String),
        tags: { Status: [{ label: 'Passed', level: 'info' }] },
      },
    });

    const planRead = stub.requests.find((r) => r.method === 'GET');
    expect(planRead?.url).toBe(PLAN_PATH);
    expect(planRead?.headers['authorization']).toBe(`Bearer ${TOKEN}`);
    expect(stub.events).toEqual([`GET ${PLAN_PATH}`, `PATCH ${CALLBACK_PATH}`]);

    const record = await finished(server);
    expect(record).toMatchObject({ status: 200, signatureVerified: true, verification: false, body, plan: { status: 200 } });
    expect(record.payload?.run_id).toBe('run-abc');
    expect(record.headers['x-tfc-task-signature']).toBe(sign(body, KEY));
    expect(record.callbacks.map((c) => [c.resultStatus, c.status])).toEqual([['passed', 200]]);
  });

  it('rejects a wrong signature with 401 and never calls back', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY });
    const body = JSON.stringify(payload(stub));

    expect(await post(server, body, sign(body, 'another-key'))).toBe(401);
    expect(await finished(server)).toMatchObject({ status: 401, signatureVerified: false, callbacks: [] });
    expect(stub.requests).toEqual([]);
  });

  it('checks the signature over the raw bytes, not a re-serialisation', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY });
    const compact = JSON.stringify(payload(stub));
    const spaced = JSON.stringify(payload(stub), null, 2);

    expect(await post(server, spaced, sign(compact, KEY))).toBe(401);
    expect(await finished(server)).toMatchObject({ status: 401, signatureVerified: false });
    expect(stub.requests).toEqual([]);
  });

  it('rejects an empty signature with 401 when it has a key', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY });

    expect(await post(server, JSON.stringify(payload(stub)), '')).toBe(401);
    expect(await finished(server)).toMatchObject({ status: 401, signatureVerified: false, callbacks: [] });
    expect(stub.requests).toEqual([]);
  });

  it('rejects a signature with 400 when it has no key, and accepts an empty one', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({});
    const body = JSON.stringify(payload(stub));

    expect(await post(server, body, sign(body, KEY))).toBe(400);
    expect(await finished(server)).toMatchObject({ status: 400, signatureVerified: false, callbacks: [] });
    expect(stub.requests).toEqual([]);

    expect(await post(server, body, '')).toBe(200);
    await eventually(() => patches(stub)[0]);
    expect(server.requests[1]).toMatchObject({ status: 200, signatureVerified: true });
  });

  it('acknowledges a notification pointed at it (200) and acts on nothing; any other JSON is still a 400', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({});
    const notification = JSON.stringify({
      payload_version: 1,
      notification_configuration_id: 'nc-abc',
      notifications: [{ trigger: 'verification' }],
    });
    expect(await post(server, notification, '')).toBe(200);
    expect(await finished(server)).toMatchObject({ status: 200, callbacks: [] });
    expect(await post(server, JSON.stringify({ hello: 'world' }), '')).toBe(400);
    expect(stub.requests).toEqual([]);
  });

  it('rejects a body that is not declared as JSON with 400', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY });
    const body = JSON.stringify(payload(stub));

    expect(await post(server, body, sign(body, KEY), 'text/plain')).toBe(400);
    expect(await finished(server)).toMatchObject({ status: 400, callbacks: [] });
    expect(stub.requests).toEqual([]);
  });

  it('answers the verification request (access_token "test-token") with 200 and no callback', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY });
    const body = JSON.stringify(payload(stub, { access_token: 'test-token', plan_json_api_url: undefined }));

    expect(await post(server, body, sign(body, KEY))).toBe(200);
    expect(await finished(server)).toMatchObject({
      status: 200,
      verification: true,
      signatureVerified: true,
      callbacks: [],
      plan: undefined,
    });
    expect(stub.requests).toEqual([]);
  });

  it('mode status:500 answers 500 and never calls back', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY, mode: 'status:500' });
    const body = JSON.stringify(payload(stub));

    expect(await post(server, body, sign(body, KEY))).toBe(500);
    expect(await finished(server)).toMatchObject({ status: 500, signatureVerified: true, callbacks: [] });
    expect(stub.requests).toEqual([]);
  });

  it('mode no-callback acknowledges and never calls back', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY, mode: 'no-callback' });
    const body = JSON.stringify(payload(stub));

    expect(await post(server, body, sign(body, KEY))).toBe(200);
    expect(await finished(server)).toMatchObject({ status: 200, callbacks: [] });
    expect(stub.requests).toEqual([]);
  });

  it('mode callback-before-ack PATCHes the callback before the POST is answered', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY, mode: 'callback-before-ack', readPlan: false });
    const body = JSON.stringify(payload(stub));

    const status = await post(server, body, sign(body, KEY));
    stub.events.push('POST answered');

    expect(status).toBe(200);
    expect(stub.events).toEqual([`PATCH ${CALLBACK_PATH}`, 'POST answered']);
    expect((await finished(server)).callbacks.map((c) => c.status)).toEqual([200]);
  });

  it('mode double-callback sends the final callback twice and records each answer', async () => {
    const stub = await startEngineStub();
    stub.callbackStatuses.push(200, 409);
    const server = await startTaskServer({ hmacKey: KEY, mode: 'double-callback' });
    const body = JSON.stringify(payload(stub));

    expect(await post(server, body, sign(body, KEY))).toBe(200);
    const record = await finished(server);
    expect(record.callbacks.map((c) => [c.resultStatus, c.status])).toEqual([
      ['passed', 200],
      ['passed', 409],
    ]);
    expect(patches(stub)).toHaveLength(2);
    expect(patches(stub)[1]?.body).toBe(patches(stub)[0]?.body);
  });

  it('mode progress sends a running callback, then the final one', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY, mode: 'progress', result: 'failed' });
    const body = JSON.stringify(payload(stub));

    expect(await post(server, body, sign(body, KEY))).toBe(200);
    const record = await finished(server);
    expect(record.callbacks.map((c) => c.resultStatus)).toEqual(['running', 'failed']);
    const [running, final] = patches(stub).map((r) => JSON.parse(r.body) as { data: { attributes: { status: string } } });
    expect(running?.data.attributes.status).toBe('running');
    expect(final?.data.attributes.status).toBe('failed');
    expect(final).toMatchObject({
      data: { relationships: { outcomes: { data: [{ attributes: { tags: { Status: [{ label: 'Failed', level: 'error' }] } } }] } } },
    });
  });

  it('mode slow:<ms> still acknowledges and calls back', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY, mode: 'slow:20', callbackDelayMs: 5 });
    const body = JSON.stringify(payload(stub));

    expect(await post(server, body, sign(body, KEY))).toBe(200);
    expect((await finished(server)).callbacks.map((c) => c.status)).toEqual([200]);
  });

  it('skips the plan read when the payload has no plan URL (pre_plan) and reports a failed plan read as failed', async () => {
    const stub = await startEngineStub();
    const server = await startTaskServer({ hmacKey: KEY });
    const prePlan = JSON.stringify(payload(stub, { stage: 'pre_plan', plan_json_api_url: undefined }));

    expect(await post(server, prePlan, sign(prePlan, KEY))).toBe(200);
    await eventually(() => (server.requests[0]?.done ? true : undefined));
    expect(stub.events).toEqual([`PATCH ${CALLBACK_PATH}`]);
    expect(server.requests[0]?.callbacks.map((c) => c.resultStatus)).toEqual(['passed']);

    stub.planStatus = 404;
    const postPlan = JSON.stringify(payload(stub));
    expect(await post(server, postPlan, sign(postPlan, KEY))).toBe(200);
    await eventually(() => (server.requests[1]?.done ? true : undefined));
    expect(server.requests[1]).toMatchObject({ plan: { status: 404 } });
    expect(server.requests[1]?.callbacks.map((c) => c.resultStatus)).toEqual(['failed']);
  });

  it('rejects an unknown mode', async () => {
    await expect(startRunTaskServer({ mode: 'sometimes' as 'callback' })).rejects.toThrow(/unknown mode/);
  });

  it('starts from the command line and prints its URL', async () => {
    const child = spawn(process.execPath, [fileURLToPath(new URL('./server.ts', import.meta.url))], {
      env: { ...process.env, PORT: '0', HMAC_KEY: KEY, NODE_OPTIONS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    closers.push(async () => {
      child.kill('SIGTERM');
      await exited;
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));

    const url = await eventually(() => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1], 10_000);
    const body = JSON.stringify({ access_token: 'test-token', payload_version: 1 });
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tfc-task-signature': sign(body, KEY) },
      body,
    });
    expect(response.status).toBe(200);
    await response.text();
    await eventually(() => (/POST \/ 200/.test(output) ? true : undefined));
  });
});
