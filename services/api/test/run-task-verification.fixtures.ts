// Task servers for the run task verification tests: real loopback servers that record what they receive, closed after each test.
import { afterEach } from '@jest/globals';
import { RunTask } from '@runtasks/shared/db';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { type AddressInfo } from 'node:net';
import { uniqueName } from '../../../test/support/assertions.ts';
import { type Harness } from '../../../test/support/harness.ts';

/** One request as the task server received it: the raw body bytes, before any parsing. */
export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export type Reply = { status: number; headers?: Record<string, string>; body?: string } | 'hang';

/** A real task server on an ephemeral loopback port that records every connection and request. */
export interface TaskServer {
  url: string;
  port: number;
  requests: ReceivedRequest[];
  connections: number;
  reply: (request: ReceivedRequest) => Reply;
  close(): Promise<void>;
}

export const servers: TaskServer[] = [];

export async function startTaskServer(reply: (request: ReceivedRequest) => Reply = () => ({ status: 200 })): Promise<TaskServer> {
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
export function requireSignature(key: string): (request: ReceivedRequest) => Reply {
  return (request) => {
    const expected = Buffer.from(createHmac('sha512', key).update(request.body).digest('hex'));
    const given = Buffer.from(String(request.headers['x-tfc-task-signature'] ?? ''));
    return given.length === expected.length && timingSafeEqual(given, expected) ? { status: 200 } : { status: 401, body: 'bad signature' };
  };
}

export const taskDocument = (attributes: Record<string, unknown>) => ({
  data: { type: 'tasks', attributes: { name: uniqueName('task'), category: 'task', ...attributes } },
});

export const countTasks = (h: Harness): Promise<number> => h.orm.em.fork().count(RunTask, {});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});
