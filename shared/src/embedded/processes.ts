import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';

/** Process and port helpers for the embedded PostgreSQL and Redis: pid files, signals, free ports. */

/** A start-up failure of the embedded services, told in one line. */
export class EmbeddedError extends Error {}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Alive and not a zombie: a zombie still answers signal 0 but has already ended. */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists, owned by someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  const stat = `/proc/${pid}/stat`;
  if (existsSync(stat)) {
    const state = /\)\s+(\S)/.exec(readFileSync(stat, 'utf8'))?.[1];
    return state !== 'Z' && state !== 'X';
  }
  return true;
}

/** For an `exit` handler: synchronous, and never throws. */
export function signalIfRunning(pid: number, signal: NodeJS.Signals): void {
  try {
    if (isRunning(pid)) process.kill(pid, signal);
  } catch {
    // Gone meanwhile.
  }
}

/** The command line of a process, or '' when it cannot be read (gone, or no /proc and no ps). */
export function commandLine(pid: number): string {
  try {
    const proc = `/proc/${pid}/cmdline`;
    if (existsSync(proc)) return readFileSync(proc, 'utf8').replaceAll('\0', ' ').trim();
    return execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

/** The first line of a pid file as a pid, if the file exists and holds one. */
export function readPid(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]?.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** Polls `check` every `everyMs` until it returns a value or `timeoutMs` passes (then undefined). */
export async function pollUntil<T>(
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  everyMs = 50,
): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) return undefined;
    await delay(everyMs);
  }
}

/**
 * Sends `signal`, then SIGKILL if the process has not ended within `timeoutMs`. For processes that are
 * not our children (an orphan of a crashed start), so their end is seen by polling.
 */
export async function stopProcess(pid: number, signal: NodeJS.Signals, timeoutMs: number): Promise<void> {
  const send = (which: NodeJS.Signals): void => {
    try {
      process.kill(pid, which);
    } catch {
      // Already gone.
    }
  };
  send(signal);
  if (await pollUntil(() => (isRunning(pid) ? undefined : true), timeoutMs)) return;
  send('SIGKILL');
  await pollUntil(() => (isRunning(pid) ? undefined : true), 5000);
}

/** Ports the kernel never hands out on its own (below Linux's ephemeral range), so none is taken by an outgoing connection. */
const PRIVATE_PORTS = { from: 20_000, to: 32_767 };

export async function freeLoopbackPort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const port = PRIVATE_PORTS.from + randomInt(PRIVATE_PORTS.to - PRIVATE_PORTS.from + 1);
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new EmbeddedError(`no free loopback port between ${PRIVATE_PORTS.from} and ${PRIVATE_PORTS.to}`);
}

/** True when something accepts a TCP connection at host:port within `timeoutMs`. */
export function answers(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (answer: boolean): void => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => done(true));
  });
}

/** The last lines of a log file, for a failure message. */
export function logTail(file: string, lines = 8): string {
  if (!existsSync(file)) return '';
  return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

/** A started child process that answers, and the way to stop it. */
export interface SupervisedChild {
  pid: number;
  stop(): Promise<void>;
}

export interface SuperviseOptions {
  /** `true` once the child answers; polled until `readyTimeoutMs`. */
  ready: () => Promise<true | undefined>;
  readyTimeoutMs: number;
  pollEveryMs: number;
  /** The signal that makes the child shut down cleanly (SIGINT: PostgreSQL's fast shutdown). */
  stopSignal: NodeJS.Signals;
  /** The message of the error thrown when the child never answers. */
  failure: () => string;
}

/**
 * Waits until a spawned child answers, then makes sure it gets its clean stop signal however this
 * process ends, and gives it 30 s to stop before SIGKILL.
 */
export async function superviseChild(child: ChildProcess, options: SuperviseOptions): Promise<SupervisedChild> {
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  child.once('error', () => undefined);
  const ended = (): boolean => child.exitCode !== null || child.signalCode !== null;
  const ready = await pollUntil(async () => (ended() ? false : await options.ready()), options.readyTimeoutMs, options.pollEveryMs);
  if (ready !== true || child.pid === undefined) {
    child.kill('SIGKILL');
    throw new EmbeddedError(options.failure());
  }
  const pid = child.pid;
  const onExit = (): void => signalIfRunning(pid, options.stopSignal);
  process.once('exit', onExit);
  return {
    pid,
    async stop() {
      process.off('exit', onExit);
      if (ended()) return;
      child.kill(options.stopSignal);
      const stopped = await Promise.race([
        exited.then(() => true),
        new Promise<false>((done) => setTimeout(() => done(false), 30_000).unref()),
      ]);
      if (!stopped) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}
