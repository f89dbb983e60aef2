import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { eventually } from '../support/fixtures.ts';

/** The fault proxy itself, in front of a loopback echo server: each mode does what it says. */

let echo: Server;
let echoSockets: Set<Socket>;
let proxy: FaultProxy;
const clients: Socket[] = [];

const until = (condition: () => boolean): Promise<true> => eventually(async () => (condition() ? true : undefined), 5_000, 10);

beforeEach(async () => {
  echoSockets = new Set();
  echo = createServer((socket) => {
    echoSockets.add(socket);
    socket.on('close', () => echoSockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', () => resolve()));
  proxy = await startFaultProxy({ targetPort: (echo.address() as AddressInfo).port });
});

afterEach(async () => {
  for (const client of clients.splice(0)) client.destroy();
  await proxy.stop();
  for (const socket of echoSockets) socket.destroy();
  await new Promise<void>((resolve) => echo.close(() => resolve()));
});

interface Client {
  socket: Socket;
  received: () => string;
  closed: () => boolean;
}

async function connect(): Promise<Client> {
  const socket = createConnection({ host: '127.0.0.1', port: proxy.port });
  clients.push(socket);
  let received = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
  socket.on('error', () => undefined);
  socket.on('close', () => (closed = true));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, received: () => received, closed: () => closed };
}

describe('fault proxy', () => {
  it('passes bytes both ways and counts them', async () => {
    const client = await connect();
    client.socket.write('hello');
    await until(() => client.received() === 'hello');
    expect(proxy.counters.bytesToTarget).toBe(5);
    expect(proxy.counters.bytesFromTarget).toBe(5);
    expect(proxy.counters.connectionsAccepted).toBe(1);
  });

  it('delays each chunk by the configured latency', async () => {
    const client = await connect();
    proxy.setMode({ kind: 'latency', latencyMs: 150 });
    const started = Date.now();
    client.socket.write('slow');
    await until(() => client.received() === 'slow');
    // Two hops (to the echo and back), each delayed: at least 2 × 150 ms, minus timer slack.
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
  });

  it('holds connections and forwards nothing as a blackhole, then delivers what it held on pass', async () => {
    const client = await connect();
    proxy.setMode({ kind: 'blackhole' });
    client.socket.write('lost');
    await until(() => proxy.counters.chunksHeld === 1);
    expect(client.received()).toBe('');
    expect(client.closed()).toBe(false);
    proxy.setMode({ kind: 'pass' });
    client.socket.write('found');
    await until(() => client.received() === 'lostfound');
  });

  it('resets open connections and new ones while in reset mode', async () => {
    const open = await connect();
    proxy.setMode({ kind: 'reset' });
    await until(() => open.closed() === true);
    const next = createConnection({ host: '127.0.0.1', port: proxy.port });
    clients.push(next);
    next.on('error', () => undefined);
    await new Promise<void>((resolve) => next.once('close', () => resolve()));
    expect(proxy.counters.connectionsReset).toBeGreaterThanOrEqual(2);
    expect(proxy.openConnections()).toBe(0);
  });

  it('closes a connection after N bytes', async () => {
    proxy.setMode({ kind: 'close-after', closeAfterBytes: 8 });
    const client = await connect();
    client.socket.write('0123456789');
    await until(() => client.closed() === true);
    expect(proxy.counters.connectionsClosedAfterBytes).toBe(1);
  });
});
