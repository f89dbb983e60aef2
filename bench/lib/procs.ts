import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Role } from './cpu.ts';
import { ROOT, TMP_DIR } from './env.ts';

/** A Node process the benchmark started; its output is kept (last lines) for when it fails. */
export interface Managed {
  name: string;
  role: Role;
  child: ChildProcess;
  pid: number;
  output: string[];
  exited: Promise<number | null>;
  /** Sends a message over IPC and waits for the answer with the same id. */
  call<T>(message: Record<string, unknown>, timeoutMs?: number): Promise<T>;
}

export interface SpawnOptions {
  name: string;
  role: Role;
  script: string;
  args?: string[];
  env: Record<string, string>;
  ipc?: boolean;
  /** --cpu-prof into bench/results/tmp/prof, and the SQL statement counter. */
  profile?: boolean;
}

let nextCallId = 1;
const live = new Set<ChildProcess>();

/** SIGKILLs every process the benchmark started that is still running (watchdog, Ctrl-C, exit). */
export function killAll(): void {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}
process.on('exit', killAll);

/**
 * Where the benchmark's database and Redis are (bench/lib/env.ts): a child that reads them itself (the
 * component client, the lean reference) must see the same ones as this process.
 */
function benchLocation(): Record<string, string> {
  const names = ['BENCH_POSTGRES_URL', 'BENCH_DATABASE', 'BENCH_REDIS_URL'];
  return Object.fromEntries(names.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]]])));
}

export function spawnNode(options: SpawnOptions): Managed {
  // Extra flags for every process, e.g. BENCH_NODE_FLAGS=--perf-basic-prof for `perf record`.
  const execArgv: string[] = (process.env['BENCH_NODE_FLAGS'] ?? '').split(/\s+/).filter((flag) => flag.length > 0);
  if (options.profile) {
    const dir = `${TMP_DIR}/prof`;
    mkdirSync(dir, { recursive: true });
    execArgv.push('--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${options.name}.${Date.now()}.cpuprofile`);
    execArgv.push('--import', `${ROOT}bench/lib/count-queries.ts`);
  }
  const child = spawn(process.execPath, [...execArgv, options.script, ...(options.args ?? [])], {
    cwd: ROOT,
    env: {
      ...benchLocation(),
      ...options.env,
      ...(options.profile ? { BENCH_QUERY_COUNT_FILE: `${TMP_DIR}/prof/${options.name}.queries.json` } : {}),
    },
    stdio: options.ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  const output: string[] = [];
  const keep = (chunk: Buffer): void => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line.trim() === '') continue;
      output.push(line);
      if (output.length > 200) output.shift();
    }
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }>();
  child.on('message', (message: { id?: number; error?: string; result?: unknown }) => {
    const waiter = message.id === undefined ? undefined : pending.get(message.id);
    if (!waiter || message.id === undefined) return;
    pending.delete(message.id);
    clearTimeout(waiter.timer);
    if (message.error) waiter.reject(new Error(`${options.name}: ${message.error}`));
    else waiter.resolve(message.result);
  });
  void exited.then((code) => {
    for (const [id, waiter] of pending) {
      pending.delete(id);
      clearTimeout(waiter.timer);
      waiter.reject(new Error(`${options.name} exited (${code}) during a call:\n${output.slice(-20).join('\n')}`));
    }
  });
  if (child.pid === undefined) throw new Error(`could not start ${options.name}`);
  return {
    name: options.name,
    role: options.role,
    child,
    pid: child.pid,
    output,
    exited,
    call<T>(message: Record<string, unknown>, timeoutMs = 120_000): Promise<T> {
      const id = nextCallId++;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`${options.name}: no answer to ${String(message['cmd'])} within ${timeoutMs} ms`));
        }, timeoutMs);
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
        child.send({ ...message, id });
      });
    },
  };
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when every process has exited. */
export async function stopAll(processes: readonly Managed[], graceMs = 15_000): Promise<void> {
  await Promise.all(
    processes.map(async (managed) => {
      if (managed.child.exitCode !== null || managed.child.signalCode !== null) return;
      managed.child.kill('SIGTERM');
      // Cleared once the process exits: a pending grace timer would keep the harness (or Jest) alive for it.
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<true>((resolve) => (timer = setTimeout(() => resolve(true), graceMs)));
      const killed = await Promise.race([managed.exited.then(() => false), graceOver]);
      clearTimeout(timer);
      if (killed) {
        managed.child.kill('SIGKILL');
        await managed.exited;
      }
    }),
  );
}

/** The first IPC message with `ready: true` (the task server's and load generator's start signal). */
export function readyMessage<T extends Record<string, unknown>>(managed: Managed, timeoutMs = 30_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const ready = new Promise<T>((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${managed.name} not ready within ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (message: T): void => {
      if (message['ready'] !== true) return;
      managed.child.off('message', onMessage);
      resolve(message);
    };
    managed.child.on('message', onMessage);
  });
  // Cleared however it ends (ready, timed out, or the process died first), so no timer outlives it.
  return whileAlive(managed, ready).finally(() => clearTimeout(timer));
}

/** Fails with the process's last output if it exits before `ready` resolves. */
export async function whileAlive<T>(managed: Managed, ready: Promise<T>): Promise<T> {
  const died = managed.exited.then((code) => {
    throw new Error(`${managed.name} exited (${code}) while starting:\n${managed.output.slice(-30).join('\n')}`);
  });
  return Promise.race([ready, died]);
}

function readOr(file: string, fallback: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return fallback;
  }
}

/** Inodes of the TCP sockets listening on `port` (IPv4 and IPv6), from /proc/net. */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readOr(file, '').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is ADDR:PORT in hex; state 0A is LISTEN; the inode is the tenth field.
      if (fields[1]?.endsWith(`:${hexPort}`) && fields[3] === '0A' && fields[9]) inodes.add(fields[9]);
    }
  }
  return inodes;
}

/** Whether process `pid` holds a socket listening on `port` (several may, with SO_REUSEPORT). */
export function listensOn(pid: number, port: number): boolean {
  const inodes = listeningInodes(port);
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  return fds.some((fd) => {
    try {
      return inodes.has(/^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1] ?? '');
    } catch {
      return false;
    }
  });
}
