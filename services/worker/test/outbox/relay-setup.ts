import { afterAll, afterEach, beforeAll } from '@jest/globals';
import { JOBS, QUEUES, runCreatedJobId } from '@runtasks/shared/queue';
import { recordOutboxEvent } from '@runtasks/shared/db';
import { type Config } from '@runtasks/shared/config';
import { type Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { type Fixture, seedOrganization } from '../../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../../test/support/harness.ts';
import { type RunningWorker, startWorker } from '../../src/worker.ts';
import { closeQueue, disconnectTimers, type OutboxRow, postRunIn, UNREACHABLE_REDIS_URL } from './helpers.ts';

/** The API without its own publication, a queue, and relays and workers the tests start and stop. */
export function useOutboxRelay() {
  const g = {} as {
    h: Harness;
    f: Fixture;
    redis: Redis;
    queue: Queue;
  };
  const workers: RunningWorker[] = [];

  async function outboxRows(runId: string): Promise<OutboxRow[]> {
    return g.h.orm.em
      .fork()
      .getConnection()
      .execute<OutboxRow[]>(
        `select id, topic, aggregate_id, payload, published_at, publish_attempts from outbox_events where aggregate_id = ? order by id`,
        [runId],
      );
  }

  /** Every job for `runId`, whatever its state. */
  async function jobsForRun(runId: string): Promise<Job[]> {
    const jobs = await g.queue.getJobs(['active', 'completed', 'delayed', 'failed', 'prioritized', 'wait', 'waiting-children']);
    return jobs.filter((job) => (job.data as { runId?: string }).runId === runId);
  }

  /** Other sessions' FOR UPDATE claims on this database's outbox_events (pg_locks spans every database). */
  async function rowLocksOnOutbox(): Promise<number> {
    const [row] = await g.h.orm.em
      .fork()
      .getConnection()
      .execute<Array<{ count: string }>>(
        `select count(*) as count from pg_locks l join pg_class c on c.oid = l.relation
          where l.database = (select oid from pg_database where datname = current_database())
            and c.relname = 'outbox_events' and l.mode = 'RowShareLock' and l.pid <> pg_backend_pid()`,
      );
    return Number(row?.count ?? 0);
  }

  /** A queue whose Redis is unreachable, with its errors silenced. */
  function deadQueue(): { queue: Queue; close(): Promise<void> } {
    const client = new Redis(UNREACHABLE_REDIS_URL, { maxRetriesPerRequest: null });
    client.on('error', () => undefined);
    const dead = new Queue(QUEUES.runs, { connection: client, prefix: g.h.config.queuePrefix });
    dead.on('error', () => undefined);
    return {
      queue: dead,
      async close() {
        await dead.close();
        client.disconnect();
      },
    };
  }

  const postRun = (message: string): Promise<string> => postRunIn(g.h, g.f, message);

  /** A run.advance event for the run, recorded as the API and the trigger record theirs (with its NOTIFY). */
  async function wakeWithEvent(runId: string): Promise<void> {
    await g.h.orm.em.fork().transactional((tx) => recordOutboxEvent(tx, JOBS.runAdvance, runId));
  }

  async function start(config: Config = g.h.config): Promise<RunningWorker> {
    const worker = await startWorker({ config, orm: g.h.orm, logger: g.h.logger, secrets: g.h.secrets, taskClient: g.h.taskClient });
    workers.push(worker);
    return worker;
  }

  async function stop(worker: RunningWorker): Promise<void> {
    workers.splice(workers.indexOf(worker), 1);
    await worker.close();
  }

  const publishedRow = (runId: string) => async (): Promise<OutboxRow[] | undefined> => {
    const rows = await outboxRows(runId);
    return rows.length > 0 && rows.every((row) => row.published_at !== null) ? rows : undefined;
  };

  /** The job once completed; read again after the state check so the return value is there. */
  const completedJob = (runId: string) => async (): Promise<Job | undefined> => {
    const state = await g.queue.getJobState(runCreatedJobId(runId));
    return state === 'completed' ? g.queue.getJob(runCreatedJobId(runId)) : undefined;
  };

  beforeAll(async () => {
    disconnectTimers.track();
    g.h = await startHarness();
    g.f = await seedOrganization(g.h, 'outbox');
    g.redis = new Redis(g.h.config.redisUrl, { maxRetriesPerRequest: null });
    g.queue = new Queue(QUEUES.runs, { connection: g.redis, prefix: g.h.config.queuePrefix });
  });

  // A failed assertion must not leave a worker running into the next test.
  afterEach(async () => {
    for (const worker of workers.splice(0)) await worker.close();
  });

  afterAll(async () => {
    await closeQueue(g.queue, g.redis);
    await g.h?.close();
    await disconnectTimers.settle();
  });
  return Object.assign(g, {
    workers,
    outboxRows,
    jobsForRun,
    rowLocksOnOutbox,
    deadQueue,
    postRun,
    wakeWithEvent,
    start,
    stop,
    publishedRow,
    completedJob,
  });
}
