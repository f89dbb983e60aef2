/**
 * Soak: the service under a steady mixed load for a bounded time, with a fault every few minutes, watched
 * for slow leaks and for anything lost.
 *
 *   npm run soak                                   # 30 minutes, 4 runs/s, a fault every 3 minutes
 *   npm run soak -- --minutes 3 --fault-every 30   # a short one (test/soak.int.test.ts runs this shape)
 *
 * Two API processes (A serves callbacks, plan reads and half the writes and is never touched; B takes the other
 * half and is killed -9 now and then) and three workers (W1 is never touched; W2 is killed -9, W3 is SIGSTOPped
 * past BullMQ's lock duration), three example task servers in this process, the service's own PostgreSQL
 * database (`BENCH_DATABASE`, default runtasks_soak) and a queue prefix of its own. Loopback only.
 *
 * Every few seconds it samples each process's RSS and open file descriptors (from /proc), its event-loop
 * delay (p99 from /metrics, reset by prom-client at every scrape), the queue's depth and the runs not yet
 * final. At the end it stops the load, waits for every run to finish and checks the invariants. It fails
 * (exit 1) when a run answered 201 is lost or stuck, an invariant is broken, an API answer was a 500, or the
 * untouched processes (A, W1) grew more than `--max-growth` (default 10 %) in RSS or file descriptors
 * between the first window after warm-up and the last window. Figures go to test-results/resilience/soak.json
 * (`npm run resilience:report` summarises them), the samples beside it.
 */
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';

process.env['BENCH_DATABASE'] ??= 'runtasks_soak';

// After BENCH_DATABASE is set: bench/lib/env.ts reads it when first imported.
const { ADMIN_TOKEN, DATABASE_NAME, DATABASE_URL, REDIS_URL, ROOT, newQueuePrefix, serviceEnv } = await import('../bench/lib/env.ts');
const { freshDatabase, deleteQueueKeys } = await import('../bench/lib/stack.ts');
const { spawnNode, stopAll } = await import('../bench/lib/procs.ts');
const { percentile, sortedCopy } = await import('../bench/lib/stats.ts');
const { startRunTaskServer } = await import('../examples/run-task-server/server.ts');
const { checkInvariants } = await import('../test/support/invariants.ts');
const { recordFigures, RESILIENCE_REPORT_DIR } = await import('../test/support/figures.ts');
const { FINAL_RUN_STATUSES } = await import('@runtasks/shared/domain');
const { QUEUES } = await import('@runtasks/shared/queue');
const { Queue } = await import('bullmq');
const { Redis } = await import('ioredis');
const pg = (await import('pg')).default;
const { Pool, request } = await import('undici');

type Managed = ReturnType<typeof spawnNode>;
type RunTaskServer = Awaited<ReturnType<typeof startRunTaskServer>>;

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    rate: { type: 'string', default: '4' },
    'fault-every': { type: 'string', default: '180' },
    'max-growth': { type: 'string', default: '0.10' },
    'sample-every': { type: 'string', default: '5' },
    label: { type: 'string', default: 'soak' },
  },
});
const DURATION_MS = Number(args.minutes) * 60_000;
const RUNS_PER_SECOND = Number(args.rate);
const FAULT_EVERY_MS = Number(args['fault-every']) * 1000;
const MAX_GROWTH = Number(args['max-growth']);
const SAMPLE_EVERY_MS = Number(args['sample-every']) * 1000;
const LABEL = String(args.label);
for (const [name, value] of Object.entries({ DURATION_MS, RUNS_PER_SECOND, FAULT_EVERY_MS, MAX_GROWTH, SAMPLE_EVERY_MS })) {
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
}
// Bounded whatever the arguments: the settle phase and stop add at most a few minutes.
if (DURATION_MS > 6 * 3_600_000) throw new Error('--minutes is at most 360');

/** BullMQ's default lock duration is 30 s: a longer stop lets the stall check hand the worker's jobs to others. */
const SIGSTOP_MS = 35_000;
const TASKS = 3;
const SETTLE_MS = 180_000;
const MEDIA_TYPE = 'application/vnd.api+json';
const started = Date.now();

function say(line: string): void {
  process.stdout.write(`[soak ${((Date.now() - started) / 1000).toFixed(0).padStart(5)} s] ${line}\n`);
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** A service process that can be killed -9, stopped and restarted under the same name and port. */
class Service {
  managed: Managed | undefined;
  starts = 0;
  unexpectedExits: string[] = [];
  private onPurpose = false;
  readonly name: string;
  readonly role: 'api' | 'worker';
  readonly port: number;
  private readonly env: Record<string, string>;

  constructor(name: string, role: 'api' | 'worker', port: number, env: Record<string, string>) {
    this.name = name;
    this.role = role;
    this.port = port;
    this.env = env;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    const child = this.managed?.child;
    return child && child.exitCode === null && child.signalCode === null ? this.managed?.pid : undefined;
  }

  async start(): Promise<void> {
    this.starts += 1;
    this.onPurpose = false;
    const script = this.role === 'api' ? 'services/api/src/main.ts' : 'services/worker/src/main.ts';
    const managed = spawnNode({
      name: this.name,
      role: this.role,
      script,
      args: this.role === 'api' ? ['--role', 'api'] : [],
      env: this.env,
    });
    this.managed = managed;
    void managed.exited.then((code) => {
      if (!this.onPurpose) this.unexpectedExits.push(`${this.name} exited ${code}: ${managed.output.slice(-5).join(' | ')}`);
    });
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (managed.child.exitCode !== null) throw new Error(`${this.name} exited while starting:\n${managed.output.slice(-20).join('\n')}`);
      try {
        const response = await request(`${this.url}/readyz`);
        await response.body.dump();
        if (response.statusCode === 200) return;
      } catch {
        // Not listening yet.
      }
      await delay(100);
    }
    throw new Error(`${this.name} not ready within 60 s:\n${managed.output.slice(-20).join('\n')}`);
  }

  async kill9(): Promise<void> {
    this.onPurpose = true;
    this.managed?.child.kill('SIGKILL');
    await this.managed?.exited;
  }

  signal(name: 'SIGSTOP' | 'SIGCONT'): void {
    this.managed?.child.kill(name);
  }

  async stop(): Promise<void> {
    this.onPurpose = true;
    if (this.managed) await stopAll([this.managed]);
  }
}

// ---------------------------------------------------------------------------------------------
// Set-up

const queuePrefix = newQueuePrefix();
say(`database ${DATABASE_NAME}, queue prefix ${queuePrefix}, ${Number(args.minutes)} min at ${RUNS_PER_SECOND} runs/s`);
await freshDatabase();
// A pool, not one client: a connection PostgreSQL ends (the fault below spares ours, an operator might not)
// is replaced instead of taking the soak down.
const db = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
db.on('error', (error) => say(`soak database connection lost (replaced): ${error.message}`));
const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 3 });
const queue = new Queue(QUEUES.runs, { connection: new Redis(REDIS_URL, { maxRetriesPerRequest: null }), prefix: queuePrefix });

const [portA, portB, ...workerPorts] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
const apiEnv = (port: number): Record<string, string> => serviceEnv({ port, queuePrefix, extra: { LOG_LEVEL: 'warn' } });
const apiA = new Service('api-A', 'api', portA ?? 0, apiEnv(portA ?? 0));
const apiB = new Service('api-B', 'api', portB ?? 0, apiEnv(portB ?? 0));
// Workers put api-A's address in payloads: callbacks and plan reads go to the API nobody kills.
const workers = workerPorts.map(
  (port, index) =>
    new Service(`worker-${index + 1}`, 'worker', port, {
      ...serviceEnv({ port: portA ?? 0, queuePrefix, extra: { LOG_LEVEL: 'warn' } }),
      WORKER_HEALTH_PORT: String(port),
    }),
);
const [w1, w2, w3] = workers as [Service, Service, Service];
const services = [apiA, apiB, ...workers];
const taskServers: RunTaskServer[] = [];

async function shutdown(): Promise<void> {
  for (const service of services) if (service.pid) service.signal('SIGCONT');
  await Promise.all(services.map((service) => service.stop()));
  await Promise.all(taskServers.map((server) => server.close()));
  await queue.close().catch(() => undefined);
  await deleteQueueKeys(queuePrefix).catch(() => 0);
  redis.disconnect();
  await db.end().catch(() => undefined);
}
process.once('SIGINT', () => void shutdown().finally(() => process.exit(130)));

const pool = new Pool(apiA.url, { connections: 8 });
const poolB = new Pool(apiB.url, { connections: 8 });
async function call(
  method: 'GET' | 'POST' | 'PATCH',
  path: string,
  token: string,
  body?: unknown,
  via = pool,
): Promise<{ status: number; json: { data?: { id?: string; attributes?: Record<string, unknown> } } }> {
  const response = await via.request({
    method,
    path: `/api/v2${path}`,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': MEDIA_TYPE }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
  });
  const text = await response.body.text();
  return { status: response.statusCode, json: text ? (JSON.parse(text) as { data?: { id?: string } }) : {} };
}
async function must(
  method: 'GET' | 'POST' | 'PATCH',
  path: string,
  token: string,
  body: unknown,
  status: number,
): Promise<{ id: string; attributes: Record<string, unknown> }> {
  const response = await call(method, path, token, body);
  if (response.status !== status) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(response.json).slice(0, 300)}`);
  return { id: response.json.data?.id ?? '', attributes: response.json.data?.attributes ?? {} };
}

let exitCode = 1;
const figures: Record<string, number | string | Record<string, number>> = {};
try {
  await apiA.start();
  await apiB.start();
  await Promise.all(workers.map((worker) => worker.start()));

  const org = 'soak';
  await must(
    'POST',
    '/organizations',
    ADMIN_TOKEN,
    { data: { type: 'organizations', attributes: { name: org, email: 'soak@example.test' } } },
    201,
  );
  const orgToken = String(
    (await must('POST', `/organizations/${org}/authentication-token`, ADMIN_TOKEN, undefined, 201)).attributes['token'],
  );
  const workspaceId = (
    await must('POST', `/organizations/${org}/workspaces`, orgToken, { data: { type: 'workspaces', attributes: { name: 'soak' } } }, 201)
  ).id;
  const hmacKeys: string[] = [];
  const taskIds: string[] = [];
  for (let index = 0; index < TASKS; index += 1) {
    const hmacKey = `soak-hmac-${index}-${newQueuePrefix()}`;
    const server = await startRunTaskServer({ hmacKey, mode: 'callback' });
    taskServers.push(server);
    hmacKeys.push(hmacKey);
    const task = await must(
      'POST',
      `/organizations/${org}/tasks`,
      orgToken,
      { data: { type: 'tasks', attributes: { name: `soak-${index}`, url: server.url, category: 'task', 'hmac-key': hmacKey } } },
      201,
    );
    taskIds.push(task.id);
    await must(
      'POST',
      `/workspaces/${workspaceId}/tasks`,
      orgToken,
      {
        data: {
          type: 'workspace-tasks',
          // Both enforcement levels and two stages, so a run has two stages and four results to move through.
          attributes: {
            'enforcement-level': index === 2 ? 'advisory' : 'mandatory',
            stages: index === 0 ? ['pre_plan', 'post_plan'] : ['post_plan'],
          },
          relationships: { task: { data: { type: 'tasks', id: task.id } } },
        },
      },
      201,
    );
  }
  say(`services up: ${services.map((service) => `${service.name} pid ${service.pid}`).join(', ')}`);

  // -------------------------------------------------------------------------------------------
  // Load: runs at a fixed rate (alternating A and B; B being down sends the create to A), reads and
  // an occasional task edit through A. Every answer is counted by class; a 500 is a failure.

  const created: string[] = [];
  const answers: Record<string, number> = {};
  const count = (key: string): void => void (answers[key] = (answers[key] ?? 0) + 1);
  let createsWithoutAnswer = 0;
  let loadRunning = true;
  const inFlight = new Set<Promise<void>>();
  const track = (work: Promise<void>): void => {
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };
  const runBody = {
    data: {
      type: 'runs',
      attributes: { message: 'soak', 'auto-apply': true },
      relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } },
    },
  };

  async function createOne(sequence: number): Promise<void> {
    const useB = sequence % 2 === 1 && apiB.pid !== undefined;
    try {
      const response = await call('POST', '/runs', orgToken, runBody, useB ? poolB : pool);
      count(`create ${response.status}`);
      if (response.status === 201 && response.json.data?.id) created.push(response.json.data.id);
    } catch (error) {
      const code = (error as { code?: string }).code ?? 'error';
      // Refused at connect: certainly not created, so send it to A. Anything later may have created it.
      if (useB && code === 'ECONNREFUSED') {
        count('create refused by B (retried on A)');
        return createOne(sequence + 1);
      }
      createsWithoutAnswer += 1;
      count(`create ${code}`);
    }
  }

  async function readOne(sequence: number): Promise<void> {
    const runId = created[created.length - 1 - (sequence % Math.min(50, Math.max(1, created.length)))];
    const paths = [
      runId ? `/runs/${runId}/task-stages?include=task_results` : `/organizations/${org}/tasks`,
      `/organizations/${org}/tasks?page[size]=20`,
      `/workspaces/${workspaceId}/tasks`,
      runId ? `/runs/${runId}` : `/workspaces/${workspaceId}`,
    ];
    try {
      const response = await call('GET', paths[sequence % paths.length] ?? '/', orgToken);
      count(`read ${response.status}`);
    } catch (error) {
      count(`read ${(error as { code?: string }).code ?? 'error'}`);
    }
  }

  async function editOne(sequence: number): Promise<void> {
    const taskId = taskIds[sequence % taskIds.length] ?? '';
    try {
      const response = await call('PATCH', `/tasks/${taskId}`, orgToken, {
        data: { type: 'tasks', attributes: { description: `soak edit ${sequence}` } },
      });
      count(`edit ${response.status}`);
    } catch (error) {
      count(`edit ${(error as { code?: string }).code ?? 'error'}`);
    }
  }

  const loadEnds = Date.now() + DURATION_MS;
  const load = (async () => {
    const tickMs = 1000 / RUNS_PER_SECOND;
    let sequence = 0;
    const first = Date.now();
    while (loadRunning && Date.now() < loadEnds) {
      // Open loop: the schedule does not wait for answers (bounded: at most 200 requests in flight).
      if (inFlight.size < 200) {
        track(createOne(sequence));
        track(readOne(sequence));
        if (sequence % Math.max(1, Math.round(RUNS_PER_SECOND * 30)) === 0) track(editOne(sequence));
      } else count('skipped (200 in flight)');
      sequence += 1;
      const next = first + sequence * tickMs;
      await delay(Math.max(0, next - Date.now()));
    }
  })();

  // -------------------------------------------------------------------------------------------
  // Samples

  interface Sample {
    atS: number;
    openRuns: number;
    queue: Record<string, number>;
    processes: Record<string, { pid: number; rssMb: number; fds: number; lagP99Ms: number | null } | null>;
  }
  const samples: Sample[] = [];
  /** Processes SIGSTOPped now: their /metrics would not answer, and their figures would be a frozen process's. */
  const stopped = new Set<Service>();
  const loadStarted = Date.now();
  const rssMb = (pid: number): number => {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : NaN;
  };
  const fds = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;
  async function lagP99Ms(service: Service): Promise<number | null> {
    try {
      const response = await request(`${service.url}/metrics`, { headersTimeout: 3000, bodyTimeout: 3000 });
      const text = await response.body.text();
      const match = /^nodejs_eventloop_lag_p99_seconds(?:\{[^}]*\})? ([\d.e+-]+)$/m.exec(text);
      return match ? Number(match[1]) * 1000 : null;
    } catch {
      return null;
    }
  }
  async function sample(): Promise<void> {
    const processes: Sample['processes'] = {};
    for (const service of services) {
      const pid = service.pid;
      try {
        processes[service.name] =
          pid && !stopped.has(service) ? { pid, rssMb: rssMb(pid), fds: fds(pid), lagP99Ms: await lagP99Ms(service) } : null;
      } catch {
        processes[service.name] = null; // exited between the check and the read
      }
    }
    const { rows } = await db.query<{ n: string }>(`select count(*) as n from runs where status <> all($1::text[])`, [
      [...FINAL_RUN_STATUSES],
    ]);
    const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'failed').catch(() => ({}));
    samples.push({ atS: Math.round((Date.now() - loadStarted) / 1000), openRuns: Number(rows[0]?.n ?? 0), queue: counts, processes });
  }
  const sampler = (async () => {
    while (Date.now() < loadEnds) {
      await sample().catch((error: unknown) => say(`sample failed: ${String(error)}`));
      await delay(SAMPLE_EVERY_MS);
    }
  })();

  // -------------------------------------------------------------------------------------------
  // Faults, one every FAULT_EVERY_MS, in rotation.

  const faults: Record<string, number> = {};
  // The SIGSTOP last, so a short soak still fits all four (it holds the worker for SIGSTOP_MS).
  const faultKinds = ['worker kill -9', 'api kill -9', 'postgres terminate backends', 'worker SIGSTOP'] as const;
  const faulting = (async () => {
    // Fault k at k × FAULT_EVERY_MS after the load started, while it fits in the load's duration.
    for (let index = 0; ; index += 1) {
      const kind = faultKinds[index % faultKinds.length] ?? 'worker kill -9';
      const at = loadStarted + (index + 1) * FAULT_EVERY_MS;
      if (at + (kind === 'worker SIGSTOP' ? SIGSTOP_MS - 5_000 : 5_000) > loadEnds) break;
      await delay(Math.max(0, at - Date.now()));
      faults[kind] = (faults[kind] ?? 0) + 1;
      say(`fault: ${kind} (${created.length} runs created so far)`);
      switch (kind) {
        case 'worker kill -9':
          await w2.kill9();
          await delay(2000);
          await w2.start();
          break;
        case 'api kill -9':
          await apiB.kill9();
          await delay(3000);
          await apiB.start();
          break;
        case 'worker SIGSTOP':
          stopped.add(w3);
          w3.signal('SIGSTOP');
          await delay(SIGSTOP_MS);
          w3.signal('SIGCONT');
          stopped.delete(w3);
          break;
        case 'postgres terminate backends':
          // Every service connection to the soak database (the pools must notice and reconnect), not ours.
          await db.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [
            DATABASE_NAME,
          ]);
          break;
      }
    }
  })();

  await Promise.all([load, sampler, faulting]);
  loadRunning = false;
  await Promise.all([...inFlight]);
  say(`load over: ${created.length} runs answered 201; waiting for every run to finish`);

  // -------------------------------------------------------------------------------------------
  // Settle, check, judge.

  const settleDeadline = Date.now() + SETTLE_MS;
  let open = Infinity;
  while (Date.now() < settleDeadline) {
    const { rows } = await db.query<{ n: string }>(`select count(*) as n from runs where status <> all($1::text[])`, [
      [...FINAL_RUN_STATUSES],
    ]);
    open = Number(rows[0]?.n ?? 0);
    if (open === 0) break;
    await delay(500);
  }
  const { rows: runRows } = await db.query<{ id: string; status: string }>('select id, status from runs');
  const finalIds = new Set(runRows.filter((row) => FINAL_RUN_STATUSES.has(row.status as never)).map((row) => row.id));
  const lost = created.filter((id) => !finalIds.has(id));
  const statuses: Record<string, number> = {};
  for (const row of runRows) statuses[row.status] = (statuses[row.status] ?? 0) + 1;
  const check = await checkInvariants(db, {
    quiescent: true,
    queue: { redis, prefix: queuePrefix },
    secrets: [...hmacKeys, orgToken, ADMIN_TOKEN],
  });

  // Growth of the processes nobody touched: median of the first window after warm-up against the last window.
  const loadSeconds = DURATION_MS / 1000;
  const windowS = Math.max(30, loadSeconds * 0.2);
  const warmupS = Math.min(Math.max(60, loadSeconds * 0.2), loadSeconds - 2 * windowS);
  const median = (values: number[]): number => percentile(sortedCopy(values), 50);
  const growth: Record<string, number> = {};
  const growthFailures: string[] = [];
  for (const service of [apiA, w1]) {
    for (const metric of ['rssMb', 'fds'] as const) {
      const values = (from: number, to: number): number[] =>
        samples
          .filter((s) => s.atS >= from && s.atS <= to)
          .map((s) => s.processes[service.name]?.[metric])
          .filter((value): value is number => typeof value === 'number' && Number.isFinite(value));
      const early = values(warmupS, warmupS + windowS);
      const late = values(loadSeconds - windowS, loadSeconds);
      if (early.length === 0 || late.length === 0) {
        growthFailures.push(`${service.name} ${metric}: no samples in a window`);
        continue;
      }
      const ratio = median(late) / median(early) - 1;
      growth[`${service.name} ${metric}`] = Math.round(ratio * 1000) / 10;
      figures[`${service.name} ${metric} early`] = Math.round(median(early) * 10) / 10;
      figures[`${service.name} ${metric} late`] = Math.round(median(late) * 10) / 10;
      if (ratio > MAX_GROWTH)
        growthFailures.push(`${service.name} ${metric} grew ${(ratio * 100).toFixed(1)} % (limit ${(MAX_GROWTH * 100).toFixed(0)} %)`);
    }
  }
  const lags = samples.flatMap((s) => Object.values(s.processes).map((p) => p?.lagP99Ms)).filter((v): v is number => typeof v === 'number');
  // Backlog: jobs waiting for a worker or running. Delayed jobs are mostly the deadline job every result
  // schedules at its progress deadline (a no-op once the result ended), so they grow with the rate by design.
  const depths = samples.map((s) => (s.queue['waiting'] ?? 0) + (s.queue['active'] ?? 0) + (s.queue['prioritized'] ?? 0));
  const delayed = samples.map((s) => s.queue['delayed'] ?? 0);
  const serverErrors = Object.entries(answers).filter(([key]) => / 500$/.test(key));
  const unexpectedExits = services.flatMap((service) => service.unexpectedExits);

  Object.assign(figures, {
    minutes: Number(args.minutes),
    runsPerSecond: RUNS_PER_SECOND,
    faultEverySeconds: FAULT_EVERY_MS / 1000,
    runsAnswered201: created.length,
    runsInDatabase: runRows.length,
    createsWithoutAnswer,
    finalStatuses: statuses,
    faultsInjected: faults,
    faultsTotal: Object.values(faults).reduce((sum, n) => sum + n, 0),
    answers,
    lost: lost.length,
    stuck: open,
    invariantViolations: check.violations.length,
    results: check.counts.results,
    growthPercent: growth,
    maxGrowthPercent: MAX_GROWTH * 100,
    eventLoopLagP99MaxMs: Math.round(Math.max(0, ...lags) * 10) / 10,
    eventLoopLagP99MedianMs: lags.length > 0 ? Math.round(median(lags) * 10) / 10 : 0,
    queueBacklogMax: Math.max(0, ...depths),
    queueBacklogLast: depths.at(-1) ?? 0,
    queueDelayedMax: Math.max(0, ...delayed),
    queueFailedLast: samples.at(-1)?.queue['failed'] ?? 0,
    samples: samples.length,
    serverErrors: serverErrors.reduce((sum, [, n]) => sum + n, 0),
    unexpectedExits: unexpectedExits.length,
    durationMs: Date.now() - started,
  });
  recordFigures('soak', LABEL, figures as Parameters<typeof recordFigures>[2]);
  mkdirSync(RESILIENCE_REPORT_DIR, { recursive: true });
  writeFileSync(`${RESILIENCE_REPORT_DIR}/soak-${LABEL}-samples.json`, `${JSON.stringify(samples)}\n`);

  const failures = [
    ...lost.slice(0, 10).map((id) => `lost or not final: ${id}`),
    ...(open > 0 ? [`${open} runs still open ${SETTLE_MS / 1000} s after the load`] : []),
    ...check.violations.slice(0, 20),
    ...growthFailures,
    ...serverErrors.map(([key, n]) => `${n} × ${key}`),
    ...unexpectedExits,
  ];
  say(JSON.stringify(figures));
  if (failures.length === 0) {
    say('PASS: nothing lost, stuck or broken; no growth beyond the limit');
    exitCode = 0;
  } else {
    say(`FAIL:\n  ${failures.join('\n  ')}`);
  }
} catch (error) {
  say(`FAIL: ${(error as Error).stack ?? String(error)}`);
} finally {
  await pool.close().catch(() => undefined);
  await poolB.close().catch(() => undefined);
  await shutdown();
}
say(`report: ${ROOT}test-results/resilience/soak.json`);
process.exit(exitCode);
