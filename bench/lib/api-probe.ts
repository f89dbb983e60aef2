/**
 * Measuring aid for `npm run bench:large-files -- --probe` (issue 43), loaded with `--import` into the API
 * process only: where a request's time goes while downloads stream. It records, between two SIGUSR2:
 *
 * - the event loop's delay (perf_hooks.monitorEventLoopDelay, 10 ms resolution);
 * - the wait for a PostgreSQL connection, from `pool.connect()` to the grant, by what the connection
 *   then ran (a chunk's binary COPY, or any other statement), and how long the other statements took;
 * - every Redis command's round trip, by command (the rate limiter's is one of them);
 * - each HTTP request's time inside the server, from its `request` event to its response's `finish`,
 *   by kind (B's workspace list, a download answered 200, a 429), and how many bytes sat unsent in the
 *   server's sockets (sampled every 50 ms: writes blocked by a slow reader pile up there).
 *
 * On SIGUSR2 it appends one JSON line of these figures to BENCH_PROBE_FILE and starts afresh.
 */
import { appendFileSync } from 'node:fs';
import http from 'node:http';
import type { Socket } from 'node:net';
import { monitorEventLoopDelay, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import pg from 'pg';

const file = process.env['BENCH_PROBE_FILE'];

/** Durations in ms of one kind, summarised on dump. */
class Samples {
  values: number[] = [];
  add(ms: number): void {
    this.values.push(ms);
  }
  summary(): { n: number; p50: number; p99: number; max: number; mean: number } {
    const sorted = [...this.values].sort((a, b) => a - b);
    const at = (p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
    const round = (ms: number): number => Math.round(ms * 10) / 10;
    const sum = sorted.reduce((total, value) => total + value, 0);
    return { n: sorted.length, p50: round(at(50)), p99: round(at(99)), max: round(at(100)), mean: round(sum / Math.max(1, sorted.length)) };
  }
}

let samples = new Map<string, Samples>();
const record = (kind: string, ms: number): void => {
  let found = samples.get(kind);
  if (!found) samples.set(kind, (found = new Samples()));
  found.add(ms);
};

const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();

// Garbage collection: each pause, by kind (1 minor, 2 major, 4 incremental, 8 weak callbacks).
new PerformanceObserver((list) => {
  for (const entry of list.getEntries())
    record(`gc kind ${String((entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? '?')}`, entry.duration);
}).observe({ entryTypes: ['gc'] });

// PostgreSQL: the wait for a connection, noted on the client and attributed to the statement it then runs.
const waited = new WeakMap<object, number>();
const originalConnect = pg.Pool.prototype.connect as (...args: unknown[]) => unknown;
pg.Pool.prototype.connect = function connect(this: pg.Pool, ...args: unknown[]) {
  const started = performance.now();
  const note = (client: unknown): void => {
    if (client) waited.set(client as object, performance.now() - started);
  };
  const callback = args[0];
  if (typeof callback === 'function') {
    return originalConnect.call(this, (error: Error | undefined, client: unknown, release: unknown) => {
      note(client);
      (callback as (...values: unknown[]) => void)(error, client, release);
    });
  }
  return (originalConnect.call(this) as Promise<unknown>).then((client) => {
    note(client);
    return client;
  });
} as typeof pg.Pool.prototype.connect;

const originalQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function query(this: pg.Client, ...args: unknown[]) {
  const first = args[0];
  // A chunk is read by a Submittable (binary-copy.ts) whose statement text is private: told apart by its `submit`.
  const kind = typeof first === 'object' && first !== null && 'submit' in first ? 'chunk' : 'other';
  const wait = waited.get(this);
  if (wait !== undefined) {
    waited.delete(this);
    record(`pg acquire wait (${kind})`, wait);
  }
  if (kind === 'chunk') return originalQuery.apply(this, args);
  const started = performance.now();
  const last = args[args.length - 1];
  if (typeof last === 'function') {
    args[args.length - 1] = (...values: unknown[]) => {
      record('pg statement (other)', performance.now() - started);
      (last as (...values: unknown[]) => void)(...values);
    };
    return originalQuery.apply(this, args);
  }
  const result = originalQuery.apply(this, args);
  if (result instanceof Promise) void result.then(() => record('pg statement (other)', performance.now() - started)).catch(() => undefined);
  return result;
} as typeof pg.Client.prototype.query;

// Redis: each command's round trip.
const originalSend = Redis.prototype.sendCommand as (...args: unknown[]) => unknown;
Redis.prototype.sendCommand = function sendCommand(this: Redis, ...args: unknown[]) {
  const command = args[0] as { name?: string; promise?: Promise<unknown> };
  const started = performance.now();
  const result = originalSend.apply(this, args);
  const done = (): void => record(`redis ${command.name ?? '?'}`, performance.now() - started);
  command.promise?.then(done, done);
  return result;
} as typeof Redis.prototype.sendCommand;

// HTTP: each request's time inside the server, and the bytes its sockets hold unsent.
const sockets = new Set<Socket>();
const originalEmit = http.Server.prototype.emit as (...args: unknown[]) => boolean;
http.Server.prototype.emit = function emit(this: http.Server, event: string, ...args: unknown[]) {
  if (event === 'connection') {
    const socket = args[0] as Socket;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  }
  if (event === 'request') {
    const [request, response] = args as [http.IncomingMessage, http.ServerResponse];
    const started = performance.now();
    response.once('finish', () => {
      const url = request.url ?? '';
      const kind =
        response.statusCode === 429
          ? '429'
          : /\/download$|\/json-output$/.test(url)
            ? `download ${response.statusCode}`
            : /\/organizations\/[^/]+\/workspaces$/.test(url)
              ? `list ${response.statusCode}`
              : 'other';
      record(`http ${kind}`, performance.now() - started);
    });
  }
  return originalEmit.call(this, event, ...args);
} as typeof http.Server.prototype.emit;

const unsent = new Samples();
const blocked = new Samples();
setInterval(() => {
  let bytes = 0;
  let needDrain = 0;
  for (const socket of sockets) {
    bytes += socket.writableLength;
    if (socket.writableNeedDrain) needDrain += 1;
  }
  unsent.add(bytes / 1024);
  blocked.add(needDrain);
}, 50).unref();

/**
 * Memory, every 100 ms: the largest of each of process.memoryUsage()'s figures, and all of them at the
 * sample where the RSS peaked (what the RSS held then: V8's heap, Buffers outside it, or neither: memory
 * the allocator keeps after it was freed).
 */
type MemorySample = Record<keyof NodeJS.MemoryUsage, number>;
const mib = (bytes: number): number => Math.round((bytes / 1048576) * 10) / 10;
let memoryMax: MemorySample | undefined;
let memoryAtRssPeak: MemorySample | undefined;
setInterval(() => {
  const now = process.memoryUsage();
  const sample = Object.fromEntries(Object.entries(now).map(([key, value]) => [key, mib(value)])) as MemorySample;
  memoryMax = memoryMax
    ? (Object.fromEntries(
        Object.entries(sample).map(([key, value]) => [key, Math.max(value, memoryMax?.[key as keyof MemorySample] ?? 0)]),
      ) as MemorySample)
    : sample;
  if (!memoryAtRssPeak || sample.rss >= memoryAtRssPeak.rss) memoryAtRssPeak = sample;
}, 100).unref();

process.on('SIGUSR2', () => {
  const figures: Record<string, unknown> = {
    at: new Date().toISOString(),
    eventLoopDelayMs: {
      p50: loop.percentile(50) / 1e6,
      p99: loop.percentile(99) / 1e6,
      max: loop.max / 1e6,
      mean: Math.round(loop.mean / 1e4) / 100,
    },
    socketsOpen: sockets.size,
    socketsUnsentKiB: unsent.summary(),
    socketsNeedingDrain: blocked.summary(),
    memoryMaxMiB: memoryMax,
    memoryAtRssPeakMiB: memoryAtRssPeak,
    memoryNowMiB: Object.fromEntries(Object.entries(process.memoryUsage()).map(([key, value]) => [key, mib(value)])),
  };
  for (const [kind, found] of [...samples.entries()].sort()) figures[kind] = found.summary();
  if (file) appendFileSync(file, `${JSON.stringify(figures)}\n`);
  loop.reset();
  samples = new Map();
  unsent.values = [];
  blocked.values = [];
  memoryMax = undefined;
  memoryAtRssPeak = undefined;
});
