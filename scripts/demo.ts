/**
 * `npm run demo`: the whole flow on one machine, live in the terminal, in about five seconds.
 *
 * Starts the service as `npm start` does (`node services/api/src/main.ts`: migrations, API and a worker
 * in one process) on a fresh database `runtasks_demo` and a free loopback port, plus two example run task
 * servers (examples/run-task-server) in this process: one that passes and one that fails. Then, through
 * the API: an organization, a workspace, a MANDATORY task (the passing server, pre_plan and post_plan) and
 * an ADVISORY task (the failing server, post_plan), and an auto-apply run. It prints every change of the
 * run, its task stages and results as it happens, a summary, and where to look; then stops everything
 * and exits 0 (1 on any failure, or when the run is not final within DEMO_TIMEOUT_SECONDS, default 60).
 *
 *   npm run demo                 # ends by itself
 *   npm run demo -- --keep       # leaves the service running after the summary, until Ctrl-C
 *   npm run demo -- --local      # the run is a pipeline's: a local workspace, driven by the runtasks CLI
 *
 * Uses the PostgreSQL server of DATABASE_URL (its database name is replaced by DEMO_DATABASE, default
 * runtasks_demo, dropped and re-created on each run) and REDIS_URL (keys under a per-run queue prefix,
 * deleted at the end); with either unset and nothing at its default address (or RUNTASKS_EMBEDDED=always),
 * an embedded PostgreSQL or private Redis of the demo's own in .runtasks/demo, stopped at the end.
 * On a terminal it redraws a small table; with CI set or without a TTY it prints plain lines only. The
 * service logs (at DEMO_LOG_LEVEL, default info) to .runtasks/demo-service.log (RUNTASKS_DATA_DIR).
 */
import { ConfigError, DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL } from '@runtasks/shared/config';
import { FINAL_RUN_STATUSES, RUN_STATUSES, type RunStatus } from '@runtasks/shared/domain';
import { EmbeddedError, onEmbeddedServer } from '@runtasks/shared/embedded';
import { Redis } from 'ioredis';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startRunTaskServer, type RunTaskServer } from '../examples/run-task-server/server.ts';
import { startOwnServices } from './lib/own-services.ts';
import { runPipeline, type Pipeline } from './demo-pipeline.ts';
import { startNotificationReceiver } from './demo-notifications.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAIN = join(ROOT, 'services/api/src/main.ts');
const env = process.env;
const LOG_FILE = resolve(ROOT, env['RUNTASKS_DATA_DIR'] || '.runtasks', 'demo-service.log');
const { values: flags } = parseArgs({
  options: { keep: { type: 'boolean', default: false }, local: { type: 'boolean', default: false } },
});
const TIMEOUT_SECONDS = Number(env['DEMO_TIMEOUT_SECONDS'] || 60);
const POLL_MS = 100;
/** Events are held this long before printing, so those seen a poll apart still print in time order. */
const SETTLE_MS = 400;
const SUCCESS: ReadonlySet<string> = new Set(['applied', 'post_apply_completed']);

const isCi = !!env['CI'] && !['0', 'false'].includes(env['CI'].toLowerCase());
const live = process.stdout.isTTY === true && !isCi && env['TERM'] !== 'dumb';
const color = live && !env['NO_COLOR'];
const paint = (code: number) => (text: string) => (color ? `\x1b[${code}m${text}\x1b[0m` : text);
const bold = paint(1);
const dim = paint(2);
const red = paint(31);
const green = paint(32);
const yellow = paint(33);
const cyan = paint(36);

function statusColor(status: string): string {
  if (['passed', 'applied', 'post_apply_completed', 'planned_and_finished'].includes(status) || status.endsWith('_completed'))
    return green(status);
  if (['failed', 'errored', 'unreachable', 'canceled', 'discarded'].includes(status)) return red(status);
  if (status.includes('awaiting')) return yellow(status);
  return cyan(status);
}

/** Failures the demo explains in one line (no stack trace). */
class DemoError extends Error {}

// ---------------------------------------------------------------------------------------------------
// Output: a timeline of plain lines, and on a terminal a live footer (spinner and table) redrawn below it.

interface TimelineEvent {
  at: number;
  /** Orders events with the same timestamp (one transaction moves a run through several statuses). */
  rank: number;
  seenAt: number;
  text: string;
}

const pendingEvents: TimelineEvent[] = [];
let footerLines = 0;
let footer: () => string[] = () => [];
let t0 = Date.now();

function clearFooter(): void {
  if (live && footerLines > 0) process.stdout.write(`\x1b[${footerLines}F\x1b[0J`);
  footerLines = 0;
}

function drawFooter(): void {
  if (!live) return;
  const lines = footer();
  if (lines.length > 0) process.stdout.write(`${lines.join('\n')}\n`);
  footerLines = lines.length;
}

/** Prints lines above the live footer (or simply prints them). */
function say(...lines: string[]): void {
  clearFooter();
  process.stdout.write(lines.map((line) => `${line}\n`).join(''));
  drawFooter();
}

function clock(at: number): string {
  const date = new Date(at);
  const pad = (value: number, width = 2): string => String(value).padStart(width, '0');
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

function event(at: number, text: string, rank = 0): void {
  pendingEvents.push({ at, rank, seenAt: Date.now(), text });
}

/**
 * Lifecycle order for ties: a run status, then the stage it starts and its results; a stage's results,
 * then the stage, then the run's `<stage>_completed`.
 */
function rankOf(kind: 'run' | 'stage' | 'result', status: string, stage = ''): number {
  const index = (name: string): number => Math.max(0, (RUN_STATUSES as readonly string[]).indexOf(name)) * 10;
  if (kind === 'run') return index(status) + 5;
  if (status === 'pending' || status === 'running') return index(`${stage}_running`) + (kind === 'stage' ? 6 : 7);
  return index(`${stage}_completed`) + (kind === 'stage' ? 2 : 1);
}

/** Prints the settled events in time order (all of them when `all`), then redraws the footer. */
function flush(all = false): void {
  const now = Date.now();
  pendingEvents.sort((a, b) => a.at - b.at || a.rank - b.rank);
  // In time order, up to the first event seen too recently: an earlier one may still be on its way.
  const settled = pendingEvents.findIndex((item) => now - item.seenAt < SETTLE_MS);
  const ready = pendingEvents.splice(0, all || settled === -1 ? pendingEvents.length : settled);
  clearFooter();
  for (const item of ready) {
    const elapsed = `+${((item.at - t0) / 1000).toFixed(2)}s`.padStart(8);
    process.stdout.write(`  ${dim(clock(item.at))} ${dim(elapsed)}  ${item.text}\n`);
  }
  drawFooter();
}

const subject = (text: string): string => `${text.padEnd(38)} `;
/** Set when the run is created: task server lines before that (verification requests) are not in the timeline. */
let timelineStarted = false;

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

// ---------------------------------------------------------------------------------------------------
// Resources, closed in reverse order however the demo ends.

const cleanups: Array<{ what: string; close: () => Promise<void> }> = [];
let serviceLog: WriteStream | undefined;
let serviceOutput = '';

async function closeAll(): Promise<void> {
  while (cleanups.length > 0) {
    const { what, close } = cleanups.pop() as (typeof cleanups)[number];
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<void>((_, reject) => {
      timer = setTimeout(() => reject(new Error('did not stop within 15 s')), 15_000);
    });
    try {
      await Promise.race([close(), limit]);
    } catch (error) {
      process.stderr.write(`demo: could not stop ${what}: ${(error as Error).message}\n`);
    } finally {
      clearTimeout(timer);
    }
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function tail(text: string, lines = 15): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

// ---------------------------------------------------------------------------------------------------
// PostgreSQL and Redis

function databaseUrls(embeddedServer?: string): { admin: string; demo: string; name: string } {
  const name = env['DEMO_DATABASE'] || 'runtasks_demo';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new DemoError(`DEMO_DATABASE must be a plain lower-case name, not "${name}"`);
  let base: URL;
  try {
    const url = env['DATABASE_URL'] || DEFAULT_DATABASE_URL;
    base = new URL(embeddedServer ? onEmbeddedServer(url, embeddedServer) : url);
  } catch {
    throw new DemoError('DATABASE_URL is not a URL');
  }
  const admin = new URL(base);
  admin.pathname = '/postgres';
  const demo = new URL(base);
  demo.pathname = `/${name}`;
  return { admin: admin.toString(), demo: demo.toString(), name };
}

/** Drops the demo database; `npm start`'s start-up creates and migrates it again. */
async function resetDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    const where = new URL(adminUrl).host;
    throw new DemoError(
      `PostgreSQL is not reachable at ${where} (${(error as Error).message || String(error)}): start it ` +
        '(e.g. pg_ctlcluster --skip-systemctl-redirect 15 main start) or set DATABASE_URL.',
    );
  }
  try {
    await client.query(`drop database if exists ${client.escapeIdentifier(name)} with (force)`);
  } finally {
    await client.end();
  }
}

async function openRedis(url: string): Promise<Redis> {
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 1, retryStrategy: () => null });
  let cause: Error | undefined;
  redis.on('error', (error: Error) => (cause ??= error));
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    redis.disconnect();
    throw new DemoError(
      `Redis is not reachable at ${new URL(url).host} (${(cause ?? (error as Error)).message}): start it ` +
        '(e.g. redis-server --daemonize yes --bind 127.0.0.1 --port 6379) or set REDIS_URL.',
    );
  }
  return redis;
}

async function deleteKeys(redis: Redis, prefix: string): Promise<number> {
  let deleted = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
    cursor = next;
    if (keys.length > 0) deleted += await redis.del(...keys);
  } while (cursor !== '0');
  return deleted;
}

// ---------------------------------------------------------------------------------------------------
// The service: `node services/api/src/main.ts` (role all), as `npm start` runs it.

interface Service {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startService(serviceEnv: Record<string, string>): Service {
  // A time-out or Ctrl-C during start-up has already closed everything: never leave a process behind.
  if (finished) throw new DemoError('stopped before the service started');
  mkdirSync(dirname(LOG_FILE), { recursive: true });
  serviceLog = createWriteStream(LOG_FILE, { flags: 'w' });
  const child = spawn(process.execPath, [MAIN], {
    cwd: ROOT,
    env: { ...env, ...serviceEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const record = (chunk: Buffer): void => {
    serviceLog?.write(chunk);
    serviceOutput = (serviceOutput + chunk.toString('utf8')).slice(-20_000);
  };
  child.stdout?.on('data', record);
  child.stderr?.on('data', record);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited };
}

async function stopService(service: Service): Promise<void> {
  if (service.child.exitCode === null && service.child.signalCode === null) {
    service.child.kill('SIGTERM');
    const killer = setTimeout(() => service.child.kill('SIGKILL'), 10_000);
    await service.exited;
    clearTimeout(killer);
  }
  await new Promise<void>((resolve) => (serviceLog ? serviceLog.end(() => resolve()) : resolve()));
}

/** Resolves when GET /ping answers 204; rejects at once if the process exits first. */
async function serviceReady(service: Service, baseUrl: string): Promise<void> {
  let exited = false;
  const early = service.exited.then(({ code, signal }) => {
    exited = true;
    throw new DemoError(`the service exited (${signal ?? `code ${code}`}) during start-up:\n${tail(serviceOutput)}`);
  });
  early.catch(() => undefined);
  const ping = (async () => {
    while (!exited) {
      const status = await fetch(`${baseUrl}/api/v2/ping`, { signal: AbortSignal.timeout(2000) }).then(
        (res) => res.status,
        () => 0,
      );
      if (status === 204) return;
      await delay(POLL_MS);
    }
  })();
  await Promise.race([ping, early]);
}

// ---------------------------------------------------------------------------------------------------
// The API

interface Doc {
  id: string;
  type: string;
  attributes: Record<string, unknown>;
  relationships?: Record<string, { data: unknown }>;
}

function client(baseUrl: string, token: string) {
  return async function api<T = { data: Doc; included?: Doc[] }>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(`${baseUrl}/api/v2${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/vnd.api+json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    if (!res.ok) throw new DemoError(`${method} /api/v2${path} answered ${res.status}: ${text.slice(0, 500)}`);
    return (text ? JSON.parse(text) : {}) as T;
  };
}

interface ResultView {
  id: string;
  task: string;
  stage: string;
  enforcement: string;
  status: string;
  message: string | null;
  outcomes: number;
  timestamps: Record<string, string>;
}

interface StageView {
  id: string;
  stage: string;
  status: string;
  timestamps: Record<string, string>;
  results: ResultView[];
}

interface Snapshot {
  status: RunStatus;
  warnings: boolean;
  createdAt: string;
  timestamps: Record<string, string>;
  stages: StageView[];
}

async function snapshot(api: ReturnType<typeof client>, runId: string): Promise<Snapshot> {
  const run = (await api('GET', `/runs/${runId}`)).data;
  const stages = await api<{ data: Doc[]; included?: Doc[] }>('GET', `/runs/${runId}/task-stages?include=task_results`);
  const results = new Map<string, ResultView>();
  for (const doc of stages.included ?? []) {
    if (doc.type !== 'task-results') continue;
    const a = doc.attributes;
    results.set(doc.id, {
      id: doc.id,
      task: String(a['task-name']),
      stage: String(a['stage']),
      enforcement: String(a['workspace-task-enforcement-level']),
      status: String(a['status']),
      message: (a['message'] as string | null) ?? null,
      outcomes: Number(a['task-result-outcomes-count'] ?? 0),
      timestamps: (a['status-timestamps'] as Record<string, string>) ?? {},
    });
  }
  return {
    status: run.attributes['status'] as RunStatus,
    warnings: run.attributes['has-task-warnings'] === true,
    createdAt: String(run.attributes['created-at']),
    timestamps: (run.attributes['status-timestamps'] as Record<string, string>) ?? {},
    stages: stages.data.map((doc) => ({
      id: doc.id,
      stage: String(doc.attributes['stage']),
      status: String(doc.attributes['status']),
      timestamps: (doc.attributes['status-timestamps'] as Record<string, string>) ?? {},
      results: ((doc.relationships?.['task-results']?.data as { id: string }[] | undefined) ?? [])
        .map((ref) => results.get(ref.id))
        .filter((result): result is ResultView => result !== undefined),
    })),
  };
}

/** `post-plan-running-at` → `post_plan_running`. */
const statusOfKey = (key: string): string => key.replace(/-at$/, '').replaceAll('-', '_');

function waitingFor(status: string, view: Snapshot | undefined): string {
  const stage = /^(pre_plan|post_plan|pre_apply|post_apply)_running$/.exec(status)?.[1];
  if (stage) {
    const results = view?.stages.find((candidate) => candidate.stage === stage)?.results ?? [];
    const done = results.filter((result) => !['pending', 'running'].includes(result.status)).length;
    return `${stage} tasks (${done} of ${results.length} reported)`;
  }
  const waits: Record<string, string> = {
    pending: 'a worker to pick the run up',
    planning: 'the plan',
    planned: 'post_plan',
    pre_plan_completed: 'the plan to start',
    post_plan_completed: 'the auto-apply',
    confirmed: 'the apply to start',
    pre_apply_completed: 'the apply',
    applying: 'the apply',
  };
  return waits[status] ?? status;
}

function table(view: Snapshot | undefined): string[] {
  if (!view) return [];
  const rows = [['stage', 'stage status', 'task', 'enforcement', 'result', 'outcomes']];
  for (const stage of view.stages) {
    stage.results.forEach((result, index) => {
      rows.push([
        index === 0 ? stage.stage : '',
        index === 0 ? stage.status : '',
        result.task,
        result.enforcement,
        result.status,
        String(result.outcomes),
      ]);
    });
  }
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return rows.map((row, index) => {
    const cells = row.map((cell, column) => {
      const padded = cell.padEnd(widths[column] ?? 0);
      if (index === 0) return dim(padded);
      return column === 1 || column === 4 ? padded.replace(cell, cell ? statusColor(cell) : cell) : padded;
    });
    return `    ${cells.join('  ')}`;
  });
}

/** The built-in executor's run: auto-apply, with a plan given at creation. */
async function createAutoApplyRun(api: ReturnType<typeof client>, workspaceId: string): Promise<string> {
  const planJson = {
    format_version: '1.2',
    terraform_version: '1.9.8',
    resource_changes: [
      { address: 'aws_vpc.main', change: { actions: ['create'] } },
      { address: 'aws_subnet.a', change: { actions: ['create'] } },
      { address: 'aws_security_group.web', change: { actions: ['update'] } },
      { address: 'aws_instance.legacy', change: { actions: ['delete'] } },
    ],
  };
  const created = await api('POST', '/runs', {
    data: {
      type: 'runs',
      attributes: { message: 'Run Tasks demo', 'auto-apply': true, 'plan-json': planJson },
      relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } },
    },
  });
  const runId = created.data.id;
  timelineStarted = true;
  t0 = Date.parse(String(created.data.attributes['created-at'])) || Date.now();
  say(`  run           ${runId} (auto-apply, a plan with 4 resource changes)`, '', bold('Timeline'));
  return runId;
}

// ---------------------------------------------------------------------------------------------------

async function probeDashboard(baseUrl: string, token: string): Promise<string> {
  const url = `${baseUrl}/admin/queues`;
  const status = async (headers: Record<string, string> = {}): Promise<number> =>
    fetch(url, { headers, redirect: 'manual', signal: AbortSignal.timeout(5000) }).then(
      async (res) => {
        await res.body?.cancel();
        return res.status;
      },
      () => 0,
    );
  const ok = (code: number): boolean => code >= 200 && code < 400;
  const anonymous = await status();
  if (anonymous === 404 || anonymous === 0) return `${url}  (not served by this build: it answered ${anonymous || 'nothing'})`;
  if (ok(anonymous)) return `${url}  (open without credentials)`;
  const basic = `Basic ${Buffer.from(`admin:${token}`).toString('base64')}`;
  if (ok(await status({ authorization: basic })))
    return `${url}  (browser login: any user name, e.g. "admin", and the site-admin token as password)`;
  if (ok(await status({ authorization: `Bearer ${token}` }))) return `${url}  (send "Authorization: Bearer <site-admin token>")`;
  return `${url}  (answered ${anonymous}; log in with the site-admin token)`;
}

/** For DATABASE_URL or REDIS_URL left unset: an embedded PostgreSQL or private Redis, stopped last. */
async function embeddedServices(): Promise<{ postgres?: string; redis?: string }> {
  try {
    const embedded = await startOwnServices({
      purpose: 'demo',
      postgres: { variable: 'DATABASE_URL', defaultUrl: DEFAULT_DATABASE_URL },
      redis: { variable: 'REDIS_URL', defaultUrl: DEFAULT_REDIS_URL },
      say: (line) => say(dim(`  ${line}`)),
    });
    if (embedded) cleanups.push({ what: 'the embedded PostgreSQL and Redis', close: () => embedded.stop() });
    return { postgres: embedded?.postgres?.url, redis: embedded?.redis?.url };
  } catch (error) {
    if (error instanceof EmbeddedError || error instanceof ConfigError) throw new DemoError(error.message);
    throw error;
  }
}

async function demo(setPhase: (phase: string) => void): Promise<number> {
  say(bold('Run Tasks demo'), '');
  setPhase('checking PostgreSQL and Redis');
  const own = await embeddedServices();
  const { admin: adminDbUrl, demo: databaseUrl, name: databaseName } = databaseUrls(own.postgres);
  const redisUrl = own.redis ?? (env['REDIS_URL'] || DEFAULT_REDIS_URL);
  const queuePrefix = `runtasks-demo-${randomBytes(4).toString('hex')}`;
  const adminToken = `demo-admin-${randomBytes(18).toString('base64url')}`;

  const redis = await openRedis(redisUrl);
  cleanups.push({
    what: 'Redis',
    close: async () => {
      await deleteKeys(redis, queuePrefix);
      redis.disconnect();
    },
  });
  await resetDatabase(adminDbUrl, databaseName);

  // Two example task servers: the one that passes will be MANDATORY, the one that fails ADVISORY.
  setPhase('starting the example run task servers');
  const servers: Record<string, RunTaskServer> = {};
  const specs = [
    { name: 'demo-passing', result: 'passed', callbackDelayMs: 600 },
    { name: 'demo-failing', result: 'failed', callbackDelayMs: 1200 },
  ] as const;
  const hmacKeys: Record<string, string> = {};
  for (const spec of specs) {
    hmacKeys[spec.name] = randomBytes(16).toString('hex');
    const server = await startRunTaskServer({
      hmacKey: hmacKeys[spec.name],
      result: spec.result,
      callbackDelayMs: spec.callbackDelayMs,
      log: (line) => taskServerEvent(spec.name, line, servers[spec.name]),
    });
    servers[spec.name] = server;
    cleanups.push({ what: `task server ${spec.name}`, close: () => server.close() });
  }

  setPhase('starting the service');
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const service = startService({
    NODE_ENV: 'development',
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    HOST: '127.0.0.1',
    PORT: String(port),
    PUBLIC_BASE_URL: baseUrl,
    ADMIN_TOKEN: adminToken,
    SECRET_KEY: randomBytes(32).toString('hex'),
    QUEUE_PREFIX: queuePrefix,
    TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32',
    OUTBOX_POLL_INTERVAL_MS: '500',
    // Nothing balances load onto this process: no need to wait before draining on exit.
    SHUTDOWN_DRAIN_DELAY_MS: '0',
    LOG_LEVEL: env['DEMO_LOG_LEVEL'] || 'info',
  });
  cleanups.push({ what: 'the service', close: () => stopService(service) });
  const started = Date.now();
  await serviceReady(service, baseUrl);
  say(
    `  service       ${baseUrl}  (API + worker: node services/api/src/main.ts, ready in ${((Date.now() - started) / 1000).toFixed(1)}s)`,
    `                database ${databaseName} (re-created), queue prefix ${queuePrefix}, log ${relative(process.cwd(), LOG_FILE)}`,
    `  task servers  demo-passing ${servers['demo-passing']?.url}  (passes after 0.6s)`,
    `                demo-failing ${servers['demo-failing']?.url}  (fails after 1.2s)`,
  );

  setPhase('creating the organization, workspace and tasks');
  const api = client(baseUrl, adminToken);
  await api('POST', '/organizations', { data: { type: 'organizations', attributes: { name: 'demo', email: 'ops@demo.example' } } });
  // --local: Terraform runs in a pipeline (here the runtasks CLI), and the mandatory task checks every stage.
  const workspace = await api('POST', '/organizations/demo/workspaces', {
    data: { type: 'workspaces', attributes: { name: 'network', 'execution-mode': flags.local ? 'local' : 'remote' } },
  });
  const attach = [
    {
      name: 'demo-passing',
      enforcement: 'mandatory',
      stages: flags.local ? ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'] : ['pre_plan', 'post_plan'],
    },
    { name: 'demo-failing', enforcement: 'advisory', stages: ['post_plan'] },
  ];
  const taskLines: string[] = [];
  for (const spec of attach) {
    // Creating a task sends the verification request (signed with the HMAC key) to the server.
    const task = await api('POST', '/organizations/demo/tasks', {
      data: {
        type: 'tasks',
        attributes: { name: spec.name, url: `${servers[spec.name]?.url}/run-task`, category: 'task', 'hmac-key': hmacKeys[spec.name] },
      },
    });
    await api('POST', `/workspaces/${workspace.data.id}/tasks`, {
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': spec.enforcement, stages: spec.stages },
        relationships: { task: { data: { type: 'tasks', id: task.data.id } } },
      },
    });
    const verified = servers[spec.name]?.requests.some(
      (request) => request.verification && request.signatureVerified && request.status === 200,
    );
    taskLines.push(
      `${spec.name} (${task.data.id}): ${spec.enforcement.toUpperCase()}, ${spec.stages.join(' + ')}` +
        (verified ? dim('  (verification request signed, answered 200)') : ''),
    );
  }
  // A generic notification configuration: the run's completion (or error) is told to a receiver on loopback.
  const notificationToken = randomBytes(16).toString('hex');
  const notifications = await startNotificationReceiver(notificationToken);
  cleanups.push({ what: 'notification receiver', close: () => notifications.close() });
  const notification = await api('POST', `/workspaces/${workspace.data.id}/notification-configurations`, {
    data: {
      type: 'notification-configurations',
      attributes: {
        name: 'demo-webhook',
        'destination-type': 'generic',
        enabled: true,
        url: notifications.url,
        token: notificationToken,
        triggers: ['run:needs_attention', 'run:completed', 'run:errored'],
      },
    },
  });
  say(
    `  organization  demo, workspace network (${workspace.data.id})`,
    `  notifications demo-webhook (${notification.data.id}) → ${notifications.url}` +
      (notifications.received.some((received) => received.signed) ? dim('  (verification signed, answered 200)') : ''),
    `  tasks         ${taskLines[0]}`,
    ...taskLines.slice(1).map((line) => `                ${line}`),
  );

  let pipeline: Pipeline | undefined;
  let pipelineRunning = false;
  let pipelineFailure: Error | undefined;
  let runId: string;
  if (flags.local) {
    setPhase('running the pipeline');
    const organizationToken = (await api('POST', '/organizations/demo/authentication-token')).data.attributes['token'];
    say(`  pipeline      the runtasks CLI (cli/bin/runtasks.js) with the organization's token, as a CI job runs it`, '', bold('Timeline'));
    timelineStarted = true;
    t0 = Date.now();
    pipelineRunning = true;
    pipeline = runPipeline({
      address: baseUrl,
      token: String(organizationToken),
      workspace: 'demo/network',
      log: (line) => event(Date.now(), `${subject('pipeline')}${line.startsWith('$') ? bold(line) : dim(line)}`, 1000),
    });
    pipeline.done.then(
      () => (pipelineRunning = false),
      (error: Error) => {
        pipelineFailure = error;
        pipelineRunning = false;
      },
    );
    runId = await pipeline.runId;
  } else {
    setPhase('creating the run');
    runId = await createAutoApplyRun(api, workspace.data.id);
  }

  // Watch: every poll reads the run and its stages with their results; each new status timestamp is an event.
  setPhase(`waiting for run ${runId} to finish`);
  const seen = new Set<string>();
  let view: Snapshot | undefined;
  let lastStatus = '';
  let statusSince = Date.now();
  let lastEventAt = Date.now();
  let tick = 0;
  footer = () => {
    if (!view) return [];
    const seconds = ((Date.now() - statusSince) / 1000).toFixed(1);
    const spinner = FINAL_RUN_STATUSES.has(view.status) ? green('✔') : cyan(SPINNER[tick % SPINNER.length] ?? '');
    const state = FINAL_RUN_STATUSES.has(view.status)
      ? `run ${statusColor(view.status)}`
      : `waiting for ${waitingFor(view.status, view)}… ${seconds}s   ${dim(`run: ${view.status}`)}`;
    return ['', `  ${spinner} ${state}`, ...table(view)];
  };
  const noteNew = (
    id: string,
    timestamps: Record<string, string>,
    describe: (status: string) => string,
    rank: (status: string) => number,
  ): void => {
    for (const [key, value] of Object.entries(timestamps)) {
      if (seen.has(`${id}:${key}`)) continue;
      seen.add(`${id}:${key}`);
      const status = statusOfKey(key);
      event(Date.parse(value) || Date.now(), describe(status), rank(status));
      lastEventAt = Date.now();
    }
  };
  for (;;) {
    view = await snapshot(api, runId);
    if (!seen.has(`${runId}:created`)) {
      seen.add(`${runId}:created`);
      event(t0, `${subject('run')}${statusColor('pending')} (created)`, rankOf('run', 'pending'));
    }
    noteNew(
      runId,
      view.timestamps,
      (status) => `${subject('run')}${statusColor(status)}`,
      (status) => rankOf('run', status),
    );
    for (const stage of view.stages) {
      noteNew(
        stage.id,
        stage.timestamps,
        (status) => `${subject(`${stage.stage} stage`)}${statusColor(status)}`,
        (status) => rankOf('stage', status, stage.stage),
      );
      for (const result of stage.results) {
        noteNew(
          result.id,
          result.timestamps,
          (status) => {
            const final = !['pending', 'running'].includes(status);
            const message = final && result.message ? dim(` — ${result.message}`) : '';
            return `${subject(`${stage.stage} › ${result.task} (${result.enforcement})`)}${statusColor(status)}${message}`;
          },
          (status) => rankOf('result', status, stage.stage),
        );
      }
    }
    if (view.status !== lastStatus) {
      lastStatus = view.status;
      statusSince = Date.now();
    }
    if (pipelineFailure) throw new DemoError(`the pipeline failed: ${pipelineFailure.message}`);
    // A pipeline's run is over when its last step is: `applied` is final only for a run without post_apply tasks.
    if (FINAL_RUN_STATUSES.has(view.status) && !pipelineRunning) break;
    if (view.status.endsWith('_awaiting_decision')) throw new DemoError(`the run waits for an override (${view.status})`);
    if (!live && Date.now() - lastEventAt > 5000) {
      event(Date.now(), dim(`… still waiting for ${waitingFor(view.status, view)}`));
      lastEventAt = Date.now();
    }
    tick += 1;
    flush();
    await delay(POLL_MS);
  }
  flush(true);
  footer = () => [];
  clearFooter();
  if (live) process.stdout.write(`\n${table(view).join('\n')}\n`);

  // Summary
  const final = view;
  const results = final.stages.flatMap((stage) => stage.results);
  const ok = SUCCESS.has(final.status);
  const elapsed = ((Date.parse(final.timestamps[`${final.status.replaceAll('_', '-')}-at`] ?? '') || Date.now()) - t0) / 1000;
  const lines = [
    '',
    bold('Summary'),
    `  run ${runId}: ${statusColor(final.status)} after ${elapsed.toFixed(1)}s`,
    `  has-task-warnings: ${final.warnings ? yellow('true') : 'false'}` +
      (final.warnings ? dim('  (an advisory task failed: the run warned and went on)') : ''),
    `  task results:`,
  ];
  for (const result of results) {
    lines.push(
      `    ${result.stage.padEnd(10)} ${result.task.padEnd(13)} ${result.enforcement.padEnd(9)} ` +
        `${statusColor(result.status)}${' '.repeat(Math.max(0, 7 - result.status.length))} ${result.outcomes} outcome${result.outcomes === 1 ? '' : 's'}  ${result.message ?? '(no message)'}`,
    );
  }
  say(...lines);

  // The notification the run produced, as its receiver got it (the worker delivers it just after the run ends).
  setPhase("waiting for the run's notification");
  const told = (): (typeof notifications.received)[number] | undefined =>
    notifications.received.find((received) => received.payload['run_id'] === runId);
  for (let waited = 0; !told() && waited < 10_000; waited += POLL_MS) await delay(POLL_MS);
  const notice = told();
  if (notice) {
    const first = notice.payload.notifications?.[0];
    say(
      `  notification  ${first?.trigger ?? '?'}: ${first?.message ?? ''}` +
        dim(`  (signature ${notice.signed ? 'verified' : 'did NOT verify'})`),
      ...JSON.stringify(notice.payload, null, 2)
        .split('\n')
        .map((line) => dim(`                ${line}`)),
    );
  } else {
    say(`  notification  ${yellow('none arrived within 10s')}` + dim(`  (see delivery-responses below)`));
  }

  setPhase('probing the dashboard');
  const dashboard = await probeDashboard(baseUrl, adminToken);
  say(
    '',
    bold('Where to look'),
    `  site-admin token  ${adminToken}`,
    `  API        curl -s -H "Authorization: Bearer ${adminToken}" '${baseUrl}/api/v2/runs/${runId}?include=task_stages'`,
    `             ${baseUrl}/api/v2/runs/${runId}/task-stages?include=task_results, /api/v2/task-results/<id>/outcomes`,
    `  notify     curl -s -H "Authorization: Bearer ${adminToken}" '${baseUrl}/api/v2/notification-configurations/${notification.data.id}'  (delivery-responses)`,
    `  dashboard  ${dashboard}`,
    flags.keep
      ? `  The service keeps running (--keep): press Ctrl-C to stop it.`
      : `  Both stop when the demo ends; \`npm run demo -- --keep\` leaves the service running until Ctrl-C.`,
  );
  if (!ok) {
    process.stderr.write(
      `demo: the run ended ${final.status}, expected applied; service log: ${relative(process.cwd(), LOG_FILE)}\n${tail(serviceOutput)}\n`,
    );
    return 1;
  }
  if (flags.keep) {
    // No time limit from here on; Ctrl-C (or the service exiting) ends the demo.
    keeping = true;
    clearTimeout(hardTimer);
    setPhase('keeping the service up');
    await service.exited;
  }
  return 0;

  /** One line per thing a task server did: verification, acknowledgement, plan read, callback. */
  function taskServerEvent(name: string, line: string, server: RunTaskServer | undefined): void {
    if (!timelineStarted) return;
    const who = subject(`${name} server`);
    const inbound = /^<- POST \S+ (\d+)(?: stage=(\S+))?/.exec(line);
    if (inbound) {
      event(Date.now(), dim(`${who}got the ${inbound[2] ?? ''} payload (signature ok), answered ${inbound[1]}`));
      return;
    }
    const outbound = /^-> (GET|PATCH) (\S+) (\d+|failed)/.exec(line);
    if (!outbound) return;
    if (outbound[1] === 'GET') {
      event(Date.now(), dim(`${who}read the plan JSON: ${outbound[3]}`));
    } else {
      const sent = server?.requests.flatMap((request) => request.callbacks).find((call) => call.url === outbound[2]);
      event(Date.now(), dim(`${who}PATCHed the callback "${sent?.resultStatus ?? '?'}": ${outbound[3]}`));
    }
  }
}

// ---------------------------------------------------------------------------------------------------

let phase = 'starting';
let finished = false;
let keeping = false;
let hardTimer: NodeJS.Timeout | undefined;
const timeout = new Promise<number>((resolve) => {
  hardTimer = setTimeout(() => {
    if (finished || keeping) return;
    flush(true);
    clearFooter();
    process.stderr.write(
      `\ndemo: timed out after ${TIMEOUT_SECONDS} s while ${phase}; stopping everything.\n` +
        (serviceOutput ? `last service output (${relative(process.cwd(), LOG_FILE)}):\n${tail(serviceOutput)}\n` : ''),
    );
    resolve(1);
  }, TIMEOUT_SECONDS * 1000);
});
const interrupted = new Promise<number>((resolve) => {
  process.once('SIGINT', () => resolve(keeping ? 0 : 130));
  process.once('SIGTERM', () => resolve(keeping ? 0 : 143));
});

const code = await Promise.race([
  demo((next) => (phase = next)).catch((error: unknown) => {
    // After a time-out or Ctrl-C, closing the service makes the watcher fail: that is not news.
    if (finished) return 1;
    flush(true);
    clearFooter();
    const message = error instanceof DemoError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error);
    process.stderr.write(`\ndemo failed while ${phase}: ${message}\n`);
    return 1;
  }),
  timeout,
  interrupted,
]);
finished = true;
clearTimeout(hardTimer);
clearFooter();
await closeAll();
process.stdout.write(code === 0 ? 'Demo finished: everything stopped.\n' : '');
process.exit(code);
