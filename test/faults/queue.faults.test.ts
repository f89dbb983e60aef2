import { afterAll, describe, expect, it } from '@jest/globals';
import { FINAL_RUN_STATUSES, type RunStatus } from '@runtasks/shared/domain';
import { holdingSql } from '@runtasks/shared/engine';
import { recordFigures } from '../support/figures.ts';
import { api, createRun } from '../support/fixtures.ts';
import {
  checkLedgers,
  createRuns,
  harness,
  invariants,
  redisClient,
  runCleanups,
  setUpWorkload,
  waitUntilAllFinal,
  WorkerFleet,
  workerEnv,
} from '../support/cluster.ts';

/**
 * The workspace run queue under worker crashes: many runs queued at once on one workspace while the
 * workers that release and admit them are killed -9 at seeded points. One run may hold the workspace
 * at a time (sampled all along, and read back from the runs' timestamps), every run ends, each one
 * started once, and the usual invariants hold (INV-12 among them: a waiting run started nothing).
 */

const SUITE = 'queue';
const RUNS = 10;
const PLAN_ONLY = 2;
const KILLS = 4;

/** A small seeded generator (mulberry32), so a failing schedule of kills can be replayed. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

interface RunRow {
  id: string;
  status: RunStatus;
  plan_only: boolean;
  queue_state: string | null;
  status_timestamps: Record<string, string>;
}

describe('the workspace run queue under worker crashes', () => {
  afterAll(runCleanups);

  it(`${RUNS} runs queued on one workspace, ${KILLS} workers killed -9 mid-admission: one holder at a time, every run ends, each started once`, async () => {
    const testStarted = Date.now();
    const seed = Number(process.env['QUEUE_FAULT_SEED'] ?? 3407);
    const random = seeded(seed);
    const h = await harness({ TASK_PROGRESS_TIMEOUT_SECONDS: '20' });
    const { fixture, servers, hmacKeys } = await setUpWorkload(h, 'queue', 'callback', 1, {}, 1);
    const fleet = new WorkerFleet(workerEnv(h, { TASK_PROGRESS_TIMEOUT_SECONDS: '20' }));
    await Promise.all([fleet.start().started, fleet.start().started]);
    const sql = <T>(query: string, params: unknown[] = []): Promise<T[]> => h.orm.em.fork().getConnection().execute<T[]>(query, params);

    // Sampled all along: never two holders of the workspace at once.
    let samples = 0;
    let maxHolders = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [row] = await sql<{ n: string | number }>(
          `select count(*) as n from runs h where h.workspace_id = ? and ${holdingSql('h')}`,
          [fixture.workspaceId],
        );
        samples += 1;
        maxHolders = Math.max(maxHolders, Number(row?.n));
        await new Promise((resolve) => setTimeout(resolve, 15));
      }
    })();

    const runIds: string[] = [];
    const creating = createRuns(h, fixture, RUNS, 4, runIds);
    // Plan-only runs never wait: they finish while the others queue.
    const planOnly = await Promise.all(
      Array.from({ length: PLAN_ONLY }, () => createRun(h, fixture.organizationToken, fixture.workspaceId, { 'plan-only': true })),
    );

    // Kills at seeded points while runs are released and admitted; each killed worker is replaced.
    let kills = 0;
    for (; kills < KILLS; kills += 1) {
      await new Promise((resolve) => setTimeout(resolve, 300 + Math.floor(random() * 900)));
      const live = fleet.live();
      const victim = live[Math.floor(random() * live.length)];
      if (victim) await fleet.kill9(victim);
      await fleet.start().started;
    }
    await creating;

    const total = RUNS + PLAN_ONLY;
    const final = await waitUntilAllFinal(h.orm, total, 150_000, fleet);
    sampling = false;
    await sampler;

    const runs = await sql<RunRow>(`select id, status, plan_only, queue_state, status_timestamps from runs order by created_at, id`);
    const queued = runs.filter((run) => !run.plan_only);
    // Each queued run held the workspace once, and the holds never overlapped: each one started (planned)
    // after the one before it ended, by the database clock.
    const holds = queued
      .map((run) => ({
        id: run.id,
        start: run.status_timestamps['planning-at'],
        end: run.status_timestamps[`${run.status.replaceAll('_', '-')}-at`],
      }))
      .filter((hold): hold is { id: string; start: string; end: string } => hold.start !== undefined && hold.end !== undefined)
      .sort((a, b) => a.start.localeCompare(b.start));
    const overlaps = holds.slice(1).flatMap((hold, index) => {
      const before = holds[index];
      return before && hold.start < before.end ? [`${hold.id} started at ${hold.start}, before ${before.id} ended at ${before.end}`] : [];
    });

    const redis = redisClient(h.config.redisUrl);
    const check = await invariants(h.orm, redis, h.config.queuePrefix, [...hmacKeys, fixture.organizationToken, h.adminToken]);
    await redis.quit();
    const ledger = await checkLedgers(h.orm, h.secrets, servers);
    const workspace = await api(h, 'get', `/workspaces/${fixture.workspaceId}`, fixture.organizationToken);

    recordFigures(SUITE, 'queueUnderKills', {
      seed,
      runs: RUNS,
      planOnly: PLAN_ONLY,
      workerKills: kills,
      samples,
      maxHolders,
      finalStatuses: final,
      holdsStarted: holds.length,
      overlaps: overlaps.length,
      invariantViolations: check.violations.length + ledger.violations.length,
      durationMs: Date.now() - testStarted,
    });

    expect(samples).toBeGreaterThan(10);
    expect(maxHolders).toBe(1);
    expect(overlaps).toEqual([]);
    // Every queued run was admitted (held once, then released), and every plan-only run stayed outside the queue.
    expect(queued.map((run) => [run.id, run.queue_state])).toEqual(queued.map((run) => [run.id, 'holding']));
    expect(holds).toHaveLength(RUNS);
    // Plan-only runs never waited: outside the queue, each planned before the last queued run did (a
    // task result a killed worker held may have errored one: it ends either way).
    const lastQueuedStart = holds.at(-1)?.start ?? '';
    expect(
      runs
        .filter((run) => run.plan_only)
        .map((run) => [
          run.queue_state,
          FINAL_RUN_STATUSES.has(run.status),
          (run.status_timestamps['planning-at'] ?? '') < lastQueuedStart,
        ]),
    ).toEqual(planOnly.map(() => [null, true, true]));
    expect(runs.every((run) => FINAL_RUN_STATUSES.has(run.status))).toBe(true);
    expect(check.violations).toEqual([]);
    expect(ledger.violations).toEqual([]);
    expect(workspace.body.data.attributes.locked).toBe(false);
    expect(fleet.unexpectedExits).toEqual([]);
  }, 240_000);
});
