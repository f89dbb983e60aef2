/**
 * A lean run task server for benchmarks: checks the HMAC-SHA512 signature of every request,
 * answers 200 at once, then PATCHes the task result's callback with `passed` (one callback per
 * task, keep-alive connections). The verification request (`access_token: "test-token"`) gets its
 * 200 and no callback. It records when the first request of each run arrived (H2 latency).
 *
 * Started by the harness with an IPC channel; `npm run bench:*` never runs it on its own.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { epochMs } from './lib/env.ts';
import { serveIpc } from './lib/ipc.ts';

const hmacKey = process.env['TASK_HMAC_KEY'] ?? '';
const agent = new Agent({ connections: 64, pipelining: 1 });
const CALLBACK_BODY = JSON.stringify({ data: { type: 'task-results', attributes: { status: 'passed', message: 'benchmark: passed' } } });

const counters = {
  requests: 0,
  verifications: 0,
  badSignatures: 0,
  callbacks: 0,
  callbackErrors: 0,
  callbackStatuses: {} as Record<string, number>,
};
let firstRequestAt = new Map<string, number>();
/** Time of the first task request of each run (epoch ms), when recording. */
let recording = false;

function verified(body: Buffer, header: string): boolean {
  if (!hmacKey) return header === '';
  const expected = Buffer.from(createHmac('sha512', hmacKey).update(body).digest('hex'), 'utf8');
  const received = Buffer.from(header.toLowerCase(), 'utf8');
  return received.length === expected.length && timingSafeEqual(received, expected);
}

async function callBack(url: string, token: string): Promise<void> {
  try {
    const response = await request(url, {
      method: 'PATCH',
      dispatcher: agent,
      body: CALLBACK_BODY,
      headers: { 'content-type': 'application/vnd.api+json', authorization: `Bearer ${token}` },
    });
    await response.body.dump();
    counters.callbacks += 1;
    counters.callbackStatuses[response.statusCode] = (counters.callbackStatuses[response.statusCode] ?? 0) + 1;
  } catch {
    counters.callbackErrors += 1;
  }
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const received = epochMs();
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    counters.requests += 1;
    const body = Buffer.concat(chunks);
    const signature = String(req.headers['x-tfc-task-signature'] ?? '');
    if (req.method !== 'POST' || !verified(body, signature)) {
      counters.badSignatures += 1;
      res.writeHead(401).end();
      return;
    }
    let payload: { access_token?: string; task_result_callback_url?: string; run_id?: string };
    try {
      payload = JSON.parse(body.toString('utf8')) as typeof payload;
    } catch {
      res.writeHead(400).end();
      return;
    }
    res.writeHead(200).end();
    if (payload.access_token === 'test-token' || !payload.task_result_callback_url || !payload.access_token) {
      counters.verifications += 1;
      return;
    }
    if (recording && payload.run_id && !firstRequestAt.has(payload.run_id)) firstRequestAt.set(payload.run_id, received);
    void callBack(payload.task_result_callback_url, payload.access_token);
  });
}

const server = createServer({ keepAliveTimeout: 60_000 }, handle);
server.listen(Number(process.env['PORT'] ?? 0), '127.0.0.1', () => {
  process.send?.({ ready: true, port: (server.address() as AddressInfo).port });
});

serveIpc({
  stats: () => ({ ...counters, callbackStatuses: { ...counters.callbackStatuses } }),
  record: (message) => {
    recording = message['on'] === true;
    firstRequestAt = new Map();
    return true;
  },
  firstRequests: () => Object.fromEntries(firstRequestAt),
});
process.on('SIGTERM', () => {
  server.close();
  void agent.close().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
});
