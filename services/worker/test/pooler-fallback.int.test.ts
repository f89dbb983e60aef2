import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MikroORM } from '@mikro-orm/postgresql';
import { nativePool, openOrm } from '@runtasks/shared/db';
import { pino } from 'pino';
import { attachTask, createRun, createTask, eventually, seedOrganization } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startScriptedServer, type ScriptedServer } from '../../../test/support/scripted-server.ts';
import { startStandInPooler, type StandInPooler } from '../../../test/support/stand-in-pooler.ts';
import { startWorker, type RunningWorker } from '../src/worker.ts';

interface LogEntry {
  level: number;
  msg: string;
  err?: { code?: string };
}

/**
 * Behind a pooler that refuses the advances' session settings (PgBouncer in transaction mode that does
 * not track them), a worker says so once as it starts and runs its advances on its main pool.
 */
describe('a worker behind a pooler that refuses the advances’ session settings', () => {
  let h: Harness;
  let pooler: StandInPooler;
  let orm: MikroORM;
  let server: ScriptedServer;
  let worker: RunningWorker;
  const entries: LogEntry[] = [];

  beforeAll(async () => {
    h = await startHarness();
    const direct = new URL(h.config.databaseUrl);
    pooler = await startStandInPooler({
      refuses: (startup) => startup.includes('plan_cache_mode'),
      upstream: { host: direct.hostname, port: Number(direct.port || 5432) },
    });
    const pooled = new URL(direct);
    pooled.hostname = '127.0.0.1';
    pooled.port = String(pooler.port);
    orm = await openOrm(pooled.toString(), 4);
    server = await startScriptedServer((_delivery, res) => res.writeHead(200).end());
    const logger = pino({ level: 'warn' }, { write: (line: string) => void entries.push(JSON.parse(line) as LogEntry) });
    worker = await startWorker({
      config: { ...h.config, databaseUrl: pooled.toString() },
      orm,
      logger,
      secrets: h.secrets,
      taskClient: h.taskClient,
    });
  });
  afterAll(async () => {
    await worker?.close();
    await orm?.close();
    await server?.close();
    await pooler?.close();
    await h?.close();
  });

  it('warns once at start-up, and advances its runs on the main pool', async () => {
    const refusals = entries.filter((entry) => entry.msg.startsWith("the database refused the advances' session settings"));
    expect(refusals).toHaveLength(1);
    expect(refusals[0]?.err?.code).toBe('08P01');
    // Only its trial connection asked for the settings; every other connection went through.
    expect(pooler.refused).toBe(1);
    expect(pooler.startups).toBeGreaterThan(1);

    // A post_plan stage is started by an advance (the run is created pending): its delivery shows the
    // advance ran, where an advance on the refused pool would have failed at every attempt.
    const f = await seedOrganization(h, 'pooler-fallback');
    await attachTask(h, f, f.workspaceId, await createTask(h, f, server.url), 'mandatory', ['post_plan']);
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const delivered = await eventually(async () => server.deliveries.find((delivery) => delivery.payload.run_id === runId), 10_000);
    expect(delivered.attempt).toBe(1);
    const stages = await (
      await nativePool(orm.em)
    ).query<{ stage: string; status: string }>('select stage, status from task_stages where run_id = $1', [runId]);
    expect(stages.rows).toEqual([{ stage: 'post_plan', status: 'running' }]);
    expect(pooler.refused).toBe(1);
    expect(entries.filter((entry) => entry.level >= 50)).toEqual([]);
  });
});
