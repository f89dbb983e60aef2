import { spawn, type ChildProcess } from 'node:child_process';
import { get } from 'node:http';
import { randomInt } from 'node:crypto';
import { connect, createServer } from 'node:net';
import { eventually } from './fixtures.ts';

/** Process-level test helpers: free ports, a private Redis to stop and start, probes on fresh connections. */

/** Ports the kernel never hands out on its own (Linux's default ip_local_port_range starts at 32768). */
const PRIVATE_PORTS = { from: 20_000, to: 32_767 };

/**
 * A port free to listen on, for a process started later. Not one the kernel chose (listen on port 0):
 * that comes from the ephemeral range, which outgoing connections take their local ports from too, and
 * one made before the process listens (its own start-up connects to PostgreSQL and Redis first) could
 * take it: the listen then fails with EADDRINUSE (seen once in a benchmark). Ports below that range
 * are only ever taken by whoever asks for them by number.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const port = PRIVATE_PORTS.from + randomInt(PRIVATE_PORTS.to - PRIVATE_PORTS.from + 1);
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port between ${PRIVATE_PORTS.from} and ${PRIVATE_PORTS.to} after 50 tries`);
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Resolves true when something on the port answers PING with PONG. */
export function redisAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const done = (answer: boolean): void => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('data', (data: Buffer) => done(data.toString('utf8').startsWith('+PONG')));
    socket.once('connect', () => socket.write('PING\r\n'));
  });
}

/** A redis-server of this file's own (never the shared one), which tests may stop and start again. */
export class PrivateRedis {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  readonly port: number;

  constructor(port: number) {
    this.port = port;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}/0`;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  async start(): Promise<void> {
    if (this.running) return;
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    await eventually(async () => ((await redisAnswers(this.port)) ? true : undefined), 10_000, 50);
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(killer);
    this.child = undefined;
  }
}

export interface Probe {
  status?: number;
  body?: string;
  error?: string;
}

/** GET on a fresh connection (no keep-alive pool), so a closed listener shows as a connection error. */
export function probe(url: string): Promise<Probe> {
  return new Promise((resolve) => {
    const req = get(url, { agent: false, timeout: 3000 }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode, body }));
      res.on('error', (error) => resolve({ error: error.message }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
  });
}

export interface ReadinessBody {
  ready: boolean;
  components: Record<string, { ok: boolean; detail?: string }>;
}

export const readiness = (result: Probe): ReadinessBody => JSON.parse(result.body ?? '{}') as ReadinessBody;
