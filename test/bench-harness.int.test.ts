import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { dropDatabase, PREFIX, withAdminClient } from './support/databases.ts';

/**
 * The benchmark harness (bench/) is run by hand, not by CI: this keeps it working. One small burst
 * through the service and one through the lean reference, each on the harness's own processes (API,
 * worker, task server that verifies signatures, load generator), in a database of this test's own
 * (under the test run's prefix, so a run that dies leaves nothing the next one does not drop).
 */
const DATABASE = `${PREFIX}_bench_harness`;
process.env['BENCH_DATABASE'] = DATABASE;
// On the servers the other tests use.
if (process.env['TEST_POSTGRES_URL']) process.env['BENCH_POSTGRES_URL'] = process.env['TEST_POSTGRES_URL'];
if (process.env['TEST_REDIS_URL']) process.env['BENCH_REDIS_URL'] = process.env['TEST_REDIS_URL'];
// After BENCH_DATABASE is set: the harness reads it when its modules load.
const { burstSample } = await import('../bench/lib/pipeline.ts');
const { leanOrg, seedPipelineOrg } = await import('../bench/lib/seed.ts');
const { freshDatabase, Stack } = await import('../bench/lib/stack.ts');
const { currentLsn, readWalRecords, walRecordsAvailable, walTables } = await import('../bench/lib/wal-records.ts');
const { DATABASE_URL } = await import('../bench/lib/env.ts');

const RUNS = 10;
const TASKS = 2;

describe('the benchmark harness', () => {
  beforeAll(async () => {
    await freshDatabase();
  }, 60_000);
  afterAll(async () => {
    await withAdminClient((client) => dropDatabase(client, DATABASE));
  });

  it.each([
    ['the service', false],
    ['the lean reference', true],
  ])(
    'completes a burst of runs through %s, every task request signed and called back, and measures it',
    async (_, lean) => {
      const stack = await Stack.start({ workers: 1, ...(lean ? { lean: { tasks: TASKS } } : {}) });
      try {
        const org = lean ? leanOrg() : await seedPipelineOrg(stack, 'harness-check', TASKS, 1);
        const { sample, cpu } = await burstSample(stack, org, RUNS);
        expect({
          runs: sample.runs,
          completed: sample.completed,
          failed: sample.failed,
          timedOut: sample.timedOut,
          taskRequests: sample.taskRequests,
          callbacksOk: sample.callbacksOk,
          callbackOther: sample.callbackOther,
          badSignatures: sample.badSignatures,
        }).toEqual({
          runs: RUNS,
          completed: RUNS,
          failed: 0,
          timedOut: false,
          taskRequests: RUNS * 2 * TASKS,
          callbacksOk: RUNS * 2 * TASKS,
          callbackOther: 0,
          badSignatures: 0,
        });
        // What the report is made of: CPU from /proc for the processes it started and for the backends
        // of its database, and the server's WAL. Ten lean runs can cost PostgreSQL less than one 10 ms
        // tick per backend, so the backends are checked as found rather than as having used CPU.
        expect(sample.cpuMsPerRun).toBeGreaterThan(0);
        expect(cpu.processes.postgres).toBeGreaterThan(0);
        expect(cpu.processes.api + cpu.processes.worker + cpu.processes['task-server']).toBe(3);
        expect(sample.walBytesPerRun).toBeGreaterThan(0);
      } finally {
        await stack.stop();
      }
    },
    120_000,
  );

  it('completes a burst through the guarded lean reference, writing what each of its guarantees needs', async () => {
    const stack = await Stack.start({ workers: 1, lean: { tasks: TASKS, guarded: true } });
    try {
      const { sample } = await burstSample(stack, leanOrg(), RUNS);
      expect({
        completed: sample.completed,
        taskRequests: sample.taskRequests,
        callbacksOk: sample.callbacksOk,
        badSignatures: sample.badSignatures,
      }).toEqual({
        completed: RUNS,
        taskRequests: RUNS * 2 * TASKS,
        callbacksOk: RUNS * 2 * TASKS,
        badSignatures: 0,
      });
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      try {
        const { rows } = await client.query<Record<string, string>>(
          // A result is acknowledged only while running, as the service's are: a verdict can beat its acknowledgement.
          `select (select count(*) from lean_guarded.results where status = 'passed' and attempts = 1 and hard_deadline is not null) as leased,
                  (select count(*) from lean_guarded.attempts where attempt = 1 and http_status = 200 and error_kind is null) as attempts,
                  (select count(*) from lean_guarded.stages where status = 'passed' and open_results = 0) as stages,
                  (select count(*) from lean_guarded.outbox where published_at is not null) as published,
                  (select count(*) from lean_guarded.outbox where published_at is null) as unpublished,
                  (select count(*) from lean_guarded.run_events where action = 'created') as events`,
        );
        expect(rows[0]).toEqual({
          leased: String(RUNS * 2 * TASKS),
          attempts: String(RUNS * 2 * TASKS),
          stages: String(RUNS * 2),
          // Each run's start, and each stage's end (published by the verdict that closed it).
          published: String(RUNS * 3),
          unpublished: '0',
          events: String(RUNS),
        });
        // A verdict needs the result's own token, and a final result takes none.
        const [result] = (await client.query<{ id: string }>('select id from lean_guarded.results limit 1')).rows;
        const callback = (token: string) =>
          fetch(`${stack.baseUrl}/api/v2/task-results/${result?.id}/callback`, {
            method: 'PATCH',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/vnd.api+json' },
            body: JSON.stringify({ data: { type: 'task-results', attributes: { status: 'failed' } } }),
          }).then((response) => response.status);
        const { resultToken } = await import('../bench/lean/guarded-token.ts');
        const { HMAC_KEY } = await import('../bench/lib/env.ts');
        expect([await callback('not-its-token'), await callback(resultToken(HMAC_KEY, result?.id ?? ''))]).toEqual([401, 409]);
      } finally {
        await client.end();
      }
    } finally {
      await stack.stop();
    }
  }, 120_000);

  it("attributes a burst's WAL to the tables its runs wrote, their indexes apart, and by record kind", async () => {
    const stack = await Stack.start({ workers: 1 });
    try {
      const org = await seedPipelineOrg(stack, 'harness-wal', TASKS, 1);
      expect(await walRecordsAvailable(stack.db)).toBe(true);
      const from = await currentLsn(stack.db);
      await burstSample(stack, org, RUNS);
      const wal = await readWalRecords(stack.db, from, await currentLsn(stack.db));
      const shares = (table: string, part: 'heap' | 'index', kind = '') =>
        wal.shares.filter((share) => share.table === table && share.part === part && share.kind.startsWith(kind));
      const records = (table: string, part: 'heap' | 'index', kind = '') =>
        shares(table, part, kind).reduce((sum, share) => sum + share.records, 0);
      // Every result inserted once (a heap insert each, INIT or not), and one entry in each of its two indexes.
      expect(records('task_results', 'heap', 'Heap/INSERT')).toBe(RUNS * 2 * TASKS);
      expect(records('task_results', 'index', 'Btree/INSERT_LEAF')).toBeGreaterThanOrEqual(RUNS * 2 * TASKS * 2);
      expect(records('runs', 'heap', 'Heap/INSERT')).toBe(RUNS);
      // An index's records count as its table's, never as a table of their own.
      expect(wal.shares.some((share) => share.table.endsWith('_pkey'))).toBe(false);
      const report = walTables(wal, RUNS, 'run').join('\n');
      expect(report).toMatch(/^\| task_results \| \d+ \| \d+ \|/m);
      expect(report).toMatch(/^\| runs \| index \| Btree\/INSERT_LEAF \|/m);
    } finally {
      await stack.stop();
    }
  }, 120_000);

  it('reads back WAL written but not yet flushed, as asynchronous commits leave it', async () => {
    const db = new pg.Client({ connectionString: DATABASE_URL });
    await db.connect();
    try {
      expect(await walRecordsAvailable(db)).toBe(true);
      await db.query('create table wal_unflushed (n int)');
      const from = await currentLsn(db);
      await db.query('set synchronous_commit = off');
      await db.query('insert into wal_unflushed select generate_series(1, 1000)');
      // Read at once: the position the server has written to is ahead of what it has flushed.
      const wal = await readWalRecords(db, from, await currentLsn(db));
      const inserts = wal.shares
        .filter((share) => share.table === 'wal_unflushed' && share.kind.startsWith('Heap'))
        .reduce((sum, share) => sum + share.records, 0);
      expect(inserts).toBeGreaterThan(0);
    } finally {
      await db.end();
    }
  });

  it('measures the service and the lean reference in turn with both up at once, each sample on its own stack', async () => {
    // As H1 interleaves them (runPipelineBesideLean): the idle stack's runs, task server and
    // processes stay out of the other's sample.
    const service = await Stack.start({ workers: 1 });
    let lean: Awaited<ReturnType<typeof Stack.start>> | undefined;
    try {
      lean = await Stack.start({ workers: 1, lean: { tasks: TASKS } });
      const serviceOrg = await seedPipelineOrg(service, 'harness-beside', TASKS, 1);
      const turns = [
        [service, serviceOrg],
        [lean, leanOrg()],
        [service, serviceOrg],
        [lean, leanOrg()],
      ] as const;
      for (const [stack, org] of turns) {
        const { sample, cpu } = await burstSample(stack, org, RUNS);
        expect([sample.completed, sample.failed, sample.taskRequests, sample.callbacksOk, sample.badSignatures]).toEqual([
          RUNS,
          0,
          RUNS * 2 * TASKS,
          RUNS * 2 * TASKS,
          0,
        ]);
        expect(cpu.processes.api + cpu.processes.worker + cpu.processes['task-server']).toBe(3);
      }
    } finally {
      await lean?.stop();
      await service.stop();
    }
  }, 180_000);
});
