import { spawn } from 'node:child_process';
import { accessSync, closeSync, constants, mkdirSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { delimiter, join, resolve } from 'node:path';
import { commandLine, EmbeddedError, freeLoopbackPort, isRunning, logTail, readPid, stopProcess, superviseChild } from './processes.ts';

/**
 * A Redis of the service's own, from a `redis-server` or `valkey-server` already on PATH (no npm
 * package ships one). Data in `<dataDir>/redis` with the append-only file on, `noeviction` as BullMQ
 * requires, loopback and a free port only.
 */
export interface PrivateRedis {
  /** `redis://127.0.0.1:<port>/0` */
  url: string;
  port: number;
  pid: number;
  binary: string;
  stop(): Promise<void>;
}

const BINARIES = ['redis-server', 'valkey-server'];

export const REDIS_INSTALL_HINT =
  'install one (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis; ' +
  'Docker: docker run -d -p 127.0.0.1:6379:6379 redis:7) or set REDIS_URL to a running server';

/** The first redis-server or valkey-server on PATH. */
export function findRedisServer(path = process.env['PATH'] ?? ''): string | undefined {
  for (const name of BINARIES) {
    for (const dir of path.split(delimiter).filter((entry) => entry.length > 0)) {
      const candidate = join(dir, name);
      try {
        accessSync(candidate, constants.X_OK);
        return candidate;
      } catch {
        // Not here.
      }
    }
  }
  return undefined;
}

function pongs(port: number): Promise<true | undefined> {
  return new Promise((done) => {
    const socket = connect(port, '127.0.0.1');
    const end = (answer: true | undefined): void => {
      socket.destroy();
      done(answer);
    };
    socket.setTimeout(1000, () => end(undefined));
    socket.once('error', () => end(undefined));
    socket.once('data', (data: Buffer) => end(data.toString('utf8').startsWith('+PONG') ? true : undefined));
    socket.once('connect', () => socket.write('PING\r\n'));
  });
}

/**
 * A private Redis left by a start that crashed: stopped (it writes its append-only file first). Only a
 * server on the port this directory's last start recorded: Redis names itself `redis-server <addr>:<port>`,
 * and after a reboot the pid may be anyone's, the machine's Redis's too.
 */
async function stopOrphan(pidFile: string, portFile: string, say: (line: string) => void): Promise<void> {
  const pid = readPid(pidFile);
  if (pid === undefined) return;
  const port = readPid(portFile);
  if (port !== undefined && isRunning(pid) && new RegExp(`(redis|valkey)-server \\S*:${port}\\b`).test(commandLine(pid))) {
    say(`Stopping the private Redis (pid ${pid}) left running by a previous start that did not stop it.`);
    await stopProcess(pid, 'SIGTERM', 30_000);
  }
  rmSync(pidFile, { force: true });
}

export async function startPrivateRedis(dataDir: string, say: (line: string) => void): Promise<PrivateRedis> {
  const binary = findRedisServer();
  if (!binary) throw new EmbeddedError(`Neither redis-server nor valkey-server is on PATH: ${REDIS_INSTALL_HINT}.`);
  const dir = resolve(dataDir, 'redis');
  const log = resolve(dataDir, 'redis.log');
  const pidFile = join(dir, 'redis.pid');
  const portFile = join(dir, 'redis.port');
  mkdirSync(dir, { recursive: true });
  await stopOrphan(pidFile, portFile, say);

  const port = await freeLoopbackPort();
  writeFileSync(portFile, `${port}\n`);
  const out = openSync(log, 'a');
  // Its own process group, as the embedded PostgreSQL: the service stops it after its own connections.
  const child = spawn(
    binary,
    [
      ...['--port', String(port), '--bind', '127.0.0.1', '--protected-mode', 'yes', '--daemonize', 'no'],
      ...['--dir', dir, '--pidfile', pidFile, '--appendonly', 'yes', '--save', '', '--maxmemory-policy', 'noeviction'],
    ],
    { detached: true, stdio: ['ignore', out, out] },
  );
  closeSync(out);
  const { pid, stop } = await superviseChild(child, {
    ready: () => pongs(port),
    readyTimeoutMs: 30_000,
    pollEveryMs: 50,
    stopSignal: 'SIGTERM',
    failure: () => `The private Redis (${binary}) did not start (log: ${log}):\n${logTail(log)}`,
  });
  return { url: `redis://127.0.0.1:${port}/0`, port, pid, binary, stop };
}
