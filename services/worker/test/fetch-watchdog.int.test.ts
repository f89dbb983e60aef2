import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Writable } from 'node:stream';
import { REDIS_LOST_MESSAGE } from '@runtasks/shared/queue';
import { pino } from 'pino';
import {
  attachTask,
  createRun,
  createTask,
  createWorkspace,
  eventually,
  seedOrganization,
  uniqueName,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startScriptedServer, type ScriptedServer } from '../../../test/support/scripted-server.ts';
import { startWorker, type RunningWorker } from '../src/worker.ts';

const STALL_MS = 1_500;
const REPLACED = 'the worker took no job while jobs waited and Redis served: its fetch loop is replaced';

/**
 * A worker whose fetch loop stops (as BullMQ's was seen to after a Redis Cluster failover) is replaced
 * once jobs have waited STALL_MS (FETCH_STALL_MS in production) while it had room and Redis served: the
 * run's first delivery goes out. A stop is made here by closing the BullMQ worker under it, which
 * takes no job then, as the stuck one did (a paused one still takes the job its blocked fetch wakes to).
 */
describe('a worker whose fetch loop stops', () => {
  let h: Harness;
  let worker: RunningWorker;
  let server: ScriptedServer;
  let f: Fixture;
  let taskId: string;
  const messages: string[] = [];

  beforeAll(async () => {
    h = await startHarness();
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          messages.push((JSON.parse(chunk.toString()) as { msg: string }).msg);
          done();
        },
      }),
    );
    worker = await startWorker({
      config: h.config,
      orm: h.orm,
      logger,
      secrets: h.secrets,
      taskClient: h.taskClient,
      fetchStallMs: STALL_MS,
    });
    server = await startScriptedServer((_delivery, res) => res.writeHead(200).end());
    f = await seedOrganization(h, 'fetch-watchdog');
    taskId = await createTask(h, f, server.url);
  });
  afterAll(async () => {
    await worker?.close();
    await server?.close();
    await h?.close();
  });

  /** A run of a workspace of its own (no run queued behind another), whose pre_plan task is delivered to `server`. */
  async function delivered(): Promise<void> {
    const workspaceId = await createWorkspace(h, f.organization, f.organizationToken, uniqueName('ws'));
    await attachTask(h, f, workspaceId, taskId, 'mandatory', ['pre_plan']);
    const runId = await createRun(h, f.organizationToken, workspaceId);
    await eventually(async () => (server.deliveries.some((delivery) => delivery.payload.run_id === runId) ? true : undefined), 30_000, 50);
  }

  it('is replaced once jobs have waited while it had room, and the replacement takes them', async () => {
    const stopped = worker.workers.runs.worker;
    await stopped.close(true);
    await delivered();
    expect(worker.workers.runs.worker === stopped).toBe(false);
    expect(messages.filter((msg) => msg === REPLACED)).toHaveLength(1);
    // Its connection dropped on purpose is no outage of Redis.
    expect(messages).not.toContain(REDIS_LOST_MESSAGE);
  });

  it('is left alone while it takes jobs', async () => {
    const working = worker.workers.runs.worker;
    for (let index = 0; index < 3; index += 1) await delivered();
    expect(worker.workers.runs.worker === working).toBe(true);
    expect(messages.filter((msg) => msg === REPLACED)).toHaveLength(1);
  });
});
