import { describe, expect, it } from '@jest/globals';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import pg from 'pg';
import {
  apiAgainst,
  checkLedgers,
  createRuns,
  invariants,
  privatePostgres,
  redisClient,
  serverErrorsBut503,
  setUpWorkload,
  statusCounts,
  TASKS_PER_RUN,
  waitUntilAllFinal,
  watchStatuses,
  workerEnv,
  WorkerFleet,
} from '../../../test/support/cluster.ts';
import { api, eventually } from '../../../test/support/fixtures.ts';
import { useCrashReport } from './crash/report.ts';

/**
 * Crash test: PostgreSQL stopped with `-m immediate` and restarted. It ends, once the system is quiet,
 * with the "nothing lost" invariants (test/support/invariants.ts), the task servers' ledgers, and no HTTP
 * 5xx other than 503. Everything runs on loopback, on a private cluster of its own port.
 */
describe('crash tests: nothing is lost when processes and backing services die', () => {
  const { report, writeReport } = useCrashReport('postgres');

  it('PostgreSQL stopped (-m immediate) mid-load: the API answers 503 JSON:API, then recovers, and runs complete', async () => {
    const testStarted = Date.now();
    const cluster = await privatePostgres();
    await cluster.start();
    const admin = new pg.Client({ connectionString: cluster.url('postgres') });
    await admin.connect();
    await admin.query('create database runtasks_crash');
    await admin.end();
    // A short progress timeout: results whose callback the outage swallowed end (errored) quickly.
    const env = { TASK_PROGRESS_TIMEOUT_SECONDS: '8' };
    const h = await apiAgainst(cluster.url('runtasks_crash'), env);
    const statuses = watchStatuses(h.server);
    const { fixture, servers, hmacKeys } = await setUpWorkload(h, 'crash-pg', 'callback');
    const fleet = new WorkerFleet(workerEnv(h, env));
    await Promise.all([fleet.start().started, fleet.start().started]);

    const before: string[] = [];
    await createRuns(h, fixture, 40, 4, before);
    await eventually(async () => (((await statusCounts(h.orm))['applied'] ?? 0) >= 5 ? true : undefined), 30_000, 50);
    // A full pool of transactions in flight when PostgreSQL dies (the API's pool holds 5): each must give
    // its connection back, or the API never gets one again.
    const pool = await h.orm.em.getConnection().getNativeClient();
    let pgStopped: () => void = () => undefined;
    const stopping = new Promise<void>((resolve) => (pgStopped = resolve));
    let opened = 0;
    const straddling = Array.from({ length: 5 }, () =>
      h.orm.em.fork().transactional(async (tx) => {
        await tx.execute('select 1');
        opened += 1;
        await stopping;
        await tx.execute('select 1');
      }),
    );
    await eventually(async () => (opened === straddling.length ? true : undefined), 10_000, 5);
    const logged = fleet.live().map((worker) => ({ worker, from: worker.messages.length }));
    await cluster.stopImmediate();
    const downAt = Date.now();
    pgStopped();
    const straddled = await Promise.allSettled(straddling);
    expect(straddled.map((outcome) => outcome.status)).toEqual(straddling.map(() => 'rejected'));

    // Every DB-backed endpoint answers a JSON:API 503 with Retry-After, promptly; never a 500.
    const [someRun] = before;
    const probes = [
      () => api(h, 'get', `/runs/${someRun}`, fixture.organizationToken),
      () => api(h, 'get', `/workspaces/${fixture.workspaceId}/runs`, fixture.organizationToken),
      () => api(h, 'get', `/organizations/${fixture.organization}`, fixture.organizationToken),
      () =>
        api(h, 'post', '/runs', fixture.organizationToken, {
          data: { type: 'runs', relationships: { workspace: { data: { type: 'workspaces', id: fixture.workspaceId } } } },
        }),
      () =>
        api(h, 'patch', `/task-results/taskrs-${randomAlphanumeric(16)}/callback`, `rtcb_${randomAlphanumeric(43)}`, {
          data: { type: 'task-results', attributes: { status: 'passed' } },
        }),
    ];
    const outage: { status: number; ms: number }[] = [];
    for (let round = 0; round < 3; round += 1) {
      for (const probe of probes) {
        const started = performance.now();
        const res = await probe();
        outage.push({ status: res.status, ms: performance.now() - started });
        expect(res.status).toBe(503);
        expect(res.headers['content-type']).toContain('application/vnd.api+json');
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
        expect(res.body.errors).toEqual([expect.objectContaining({ status: '503' })]);
        expect(res.text).not.toMatch(/\n\s+at |ECONNREFUSED|postgres/i);
      }
    }
    // Not DB-backed: still served.
    expect((await api(h, 'get', '/ping')).status).toBe(204);
    // An outage the workers felt too: each lost its outbox listener's connection before PostgreSQL is back.
    await eventually(
      async () =>
        logged.every(({ worker, from }) => worker.messages.slice(from).includes('outbox listener connection lost; polling continues'))
          ? true
          : undefined,
      15_000,
      50,
    );
    await cluster.start();
    const downtimeMs = Date.now() - downAt;

    // The API recovers without a restart.
    const recoveredAt = Date.now();
    await eventually(
      async () => ((await api(h, 'get', `/runs/${someRun}`, fixture.organizationToken)).status === 200 ? true : undefined),
      15_000,
      100,
    );
    const recoveryMs = Date.now() - recoveredAt;
    const poolAfterRecovery = { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
    const after: string[] = [];
    await createRuns(h, fixture, 40, 4, after);

    const total = before.length + after.length;
    const final = await waitUntilAllFinal(h.orm, total, 60_000, fleet);
    const ledger = await checkLedgers(h.orm, h.secrets, servers);
    const redis = redisClient(h.config.redisUrl);
    const check = await invariants(h.orm, redis, h.config.queuePrefix, [...hmacKeys, fixture.organizationToken, h.adminToken]);

    // A run that did not complete was hit by the outage: a task server's plan read or callback was refused.
    const stopped = await h.orm.em.fork().execute<{ run_id: string; status: string; result_ids: string[] }[]>(
      `select r.id as run_id, r.status, array_agg(tr.id) as result_ids from runs r
           join task_stages ts on ts.run_id = r.id join task_results tr on tr.task_stage_id = ts.id
          where r.status <> 'applied' group by r.id, r.status`,
    );
    const refused = new Set(
      servers.flatMap((server) =>
        server.requests
          .filter((record) => [record.plan, ...record.callbacks].some((call) => call !== undefined && call.status !== 200))
          .map((record) => record.payload?.task_result_id ?? ''),
      ),
    );
    const unexplained = stopped.filter((row) => !row.result_ids.some((id) => refused.has(id)));

    report.scenarios['postgresRestart'] = {
      runs: total,
      postgresStops: 1,
      downtimeMs,
      recoveryMs,
      poolAfterRecovery,
      poolAtQuiescence: { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount },
      probesDuringOutage: outage.length,
      maxProbeMs: Math.round(Math.max(...outage.map((probe) => probe.ms))),
      responses503: statuses.get(503) ?? 0,
      finalStatuses: final,
      runsStoppedByTheOutage: stopped.length,
      ledger: { ...ledger, violations: ledger.violations.slice(0, 20) },
      invariantViolations: check.violations.slice(0, 20),
      httpServerErrorsBut503: serverErrorsBut503(statuses),
      requestsAnsweredWithOther5xx: statuses.failures.slice(0, 20),
      unexpectedExits: fleet.unexpectedExits.length,
      invariantCounts: check.counts,
      violations: check.violations.length + ledger.violations.length + unexplained.length,
      durationMs: Date.now() - testStarted,
    };
    await writeReport();

    expect(Math.max(...outage.map((probe) => probe.ms))).toBeLessThan(6_000);
    // No connection leaked by the outage: nothing is in flight now, so every pooled connection is idle.
    expect(pool.totalCount).toBe(pool.idleCount);
    expect(pool.waitingCount).toBe(0);
    expect(unexplained).toEqual([]);
    for (const row of stopped) expect(row.status).toBe('errored');
    // Runs created after the outage all complete.
    const afterStatuses = await h.orm.em
      .fork()
      .execute<{ status: string }[]>(`select distinct status from runs where id in (${after.map(() => '?').join(', ')})`, after);
    expect(afterStatuses.map((row) => row.status)).toEqual(['applied']);
    expect(ledger.violations).toEqual([]);
    expect(check.violations).toEqual([]);
    expect(check.counts).toMatchObject({ runs: total, final: total, results: total * TASKS_PER_RUN });
    expect(serverErrorsBut503(statuses)).toEqual({});
    expect(fleet.unexpectedExits).toEqual([]);
  }, 150_000);
});
