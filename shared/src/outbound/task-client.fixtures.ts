// Helpers of the task client's tests: a mock agent, clients and loopback servers closed after each test.
import { afterEach, expect } from '@jest/globals';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo } from 'node:net';
import { MockAgent } from 'undici';
import { encodePayload, verificationPayload } from './payload.ts';
import { createTaskClient, type DeliveryErrorKind, type DeliveryOutcome, type TaskClient } from './task-client.ts';

export const ORIGIN = 'http://tasks.example.test';
export const BODY = encodePayload(verificationPayload('https://runtasks.example.test', 'acme', new Date('2026-01-02T03:04:05.678Z')));

export function mockAgent(): MockAgent {
  const agent = new MockAgent({ enableCallHistory: true });
  agent.disableNetConnect();
  return agent;
}

export const callsOf = (agent: MockAgent) => agent.getCallHistory()?.calls() ?? [];

export const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

export function clientWith(options: Parameters<typeof createTaskClient>[0]): TaskClient {
  const client = createTaskClient(options);
  cleanups.push(() => client.close());
  return client;
}

/** A real loopback server; `handler` decides what each request gets. Counts connections. */
export async function realServer(
  handler: (res: ServerResponse, path: string) => void,
): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(res, req.url ?? ''));
  });
  server.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}

export function expectError(outcome: DeliveryOutcome, errorKind: DeliveryErrorKind): void {
  expect(outcome).toMatchObject({ kind: 'error', errorKind });
  expect(outcome.durationMs).toBeGreaterThanOrEqual(0);
}
