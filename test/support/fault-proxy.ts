import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a backing service (Redis, PostgreSQL) whose behaviour can be
 * switched while clients are connected, to inject network faults without touching the shared
 * services. Modes:
 * - `pass`: bytes flow both ways untouched.
 * - `latency`: each chunk, in either direction, is delayed by `latencyMs` (order kept per direction).
 * - `blackhole`: connections are accepted and held open, nothing is forwarded either way; chunks
 *   that arrive are held (their source paused, as TCP backpressure would) and delivered in order
 *   when the mode changes, like a partition that heals before TCP gives up. Dropping them instead
 *   would desynchronise the protocol stream, which no real network does to a live TCP connection.
 * - `reset`: every open connection is destroyed now, and new ones as soon as they connect.
 * - `close-after`: a connection is closed once `closeAfterBytes` bytes (both directions) crossed it.
 * Counters say what the fault actually hit. `stop()` destroys every socket and closes the listener,
 * so nothing outlives a test; a bounded `maxConnections` keeps a reconnect storm finite.
 */
export type FaultMode =
  | { kind: 'pass' }
  | { kind: 'latency'; latencyMs: number }
  | { kind: 'blackhole' }
  | { kind: 'reset' }
  | { kind: 'close-after'; closeAfterBytes: number };

export interface FaultProxyCounters {
  connectionsAccepted: number;
  connectionsReset: number;
  connectionsClosedAfterBytes: number;
  bytesToTarget: number;
  bytesFromTarget: number;
  /** Chunks held because the proxy was a blackhole when they arrived (delivered when it heals). */
  chunksHeld: number;
}

export interface FaultProxy {
  readonly port: number;
  readonly counters: FaultProxyCounters;
  /** Sockets currently open from clients (a connection counts once). */
  openConnections(): number;
  setMode(mode: FaultMode): void;
  mode(): FaultMode;
  stop(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  bytes: number;
  held: { from: Socket; to: Socket; chunk: Buffer; toTarget: boolean }[];
}

export async function startFaultProxy(options: { targetHost?: string; targetPort: number; maxConnections?: number }): Promise<FaultProxy> {
  const targetHost = options.targetHost ?? '127.0.0.1';
  const counters: FaultProxyCounters = {
    connectionsAccepted: 0,
    connectionsReset: 0,
    connectionsClosedAfterBytes: 0,
    bytesToTarget: 0,
    bytesFromTarget: 0,
    chunksHeld: 0,
  };
  let current: FaultMode = { kind: 'pass' };
  const pairs = new Set<Pair>();
  const timers = new Set<NodeJS.Timeout>();

  const destroyPair = (pair: Pair): void => {
    pair.client.destroy();
    pair.upstream.destroy();
    pairs.delete(pair);
  };

  const forward = (pair: Pair, from: Socket, to: Socket, chunk: Buffer, toTarget: boolean): void => {
    const mode = current;
    if (mode.kind === 'blackhole') {
      counters.chunksHeld += 1;
      pair.held.push({ from, to, chunk, toTarget });
      from.pause();
      return;
    }
    if (mode.kind === 'reset') {
      counters.connectionsReset += 1;
      destroyPair(pair);
      return;
    }
    const deliver = (): void => {
      if (to.destroyed) return;
      if (toTarget) counters.bytesToTarget += chunk.length;
      else counters.bytesFromTarget += chunk.length;
      pair.bytes += chunk.length;
      to.write(chunk);
      if (current.kind === 'close-after' && pair.bytes >= current.closeAfterBytes) {
        counters.connectionsClosedAfterBytes += 1;
        destroyPair(pair);
      }
    };
    if (mode.kind === 'latency') {
      // Pausing the source while a chunk waits keeps the chunks of one direction in order.
      from.pause();
      const timer = setTimeout(() => {
        timers.delete(timer);
        deliver();
        from.resume();
      }, mode.latencyMs);
      timers.add(timer);
      return;
    }
    deliver();
  };

  const server: Server = createServer((client) => {
    counters.connectionsAccepted += 1;
    if (current.kind === 'reset' || pairs.size >= (options.maxConnections ?? 200)) {
      counters.connectionsReset += 1;
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: targetHost, port: options.targetPort });
    const pair: Pair = { client, upstream, bytes: 0, held: [] };
    pairs.add(pair);
    client.on('data', (chunk: Buffer) => forward(pair, client, upstream, chunk, true));
    upstream.on('data', (chunk: Buffer) => forward(pair, upstream, client, chunk, false));
    // Either side ending or failing ends both: a half-open pair would look like a blackhole by accident.
    for (const socket of [client, upstream]) {
      socket.on('error', () => destroyPair(pair));
      socket.on('close', () => destroyPair(pair));
    }
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    port,
    counters,
    openConnections: () => pairs.size,
    mode: () => current,
    setMode(mode: FaultMode): void {
      current = mode;
      if (mode.kind !== 'blackhole') {
        for (const pair of [...pairs]) {
          const held = pair.held.splice(0);
          for (const item of held) forward(pair, item.from, item.to, item.chunk, item.toTarget);
          pair.client.resume();
          pair.upstream.resume();
        }
      }
      if (mode.kind === 'reset') {
        for (const pair of [...pairs]) {
          counters.connectionsReset += 1;
          destroyPair(pair);
        }
      }
    },
    async stop(): Promise<void> {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      for (const pair of [...pairs]) destroyPair(pair);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
