import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { JOB_OPTIONS, JOBS, outboxJobId, QUEUES, runCreatedJobId } from '@runtasks/shared/queue';
import { recordOutboxEvent } from '@runtasks/shared/db';
import { type Config } from '@runtasks/shared/config';
import { Queue, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { configurationArchive } from '../../../test/support/archives.ts';
import { api, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { SocketDestroyTimers } from '../../../test/support/ioredis-timers.ts';
import { OutboxRelay } from '../src/outbox-relay.ts';
import { startWorker, type RunningWorker } from '../src/worker.ts';

/** A closed port: nothing listens on TCP port 1 on loopback. */
const UNREACHABLE_REDIS_URL = 'redis://127.0.0.1:1/0';

/** The dead sockets' timers ioredis arms when the unreachable-Redis test disconnects (see SocketDestroyTimers). */
const disconnectTimers = new SocketDestroyTimers();

interface OutboxRow {
  id: string;
  topic: string;
  aggregate_id: string;
  payload: Record<string, string>;
  published_at: string | Date | null;
  publish_attempts: number;
}

/** Creates a run in the fixture's workspace through the harness's API; its id. */
async function postRunIn(harness: Harness, fixture: Fixture, message: string): Promise<string> {
  const res = await api(harness, 'post', '/runs', fixture.organizationToken, {
    data: {
      type: 'runs',
      attributes: { message },
      relationships: { workspace: { data: { type: 'workspaces', id: fixture.workspaceId } } },
    },
  });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

/** A suite's queue emptied and closed, and its connection with it. */
async function closeQueue(queue: Queue | undefined, redis: Redis | undefined): Promise<void> {
  if (queue) {
    await queue.obliterate({ force: true });
    await queue.close();
  }
  redis?.disconnect();
}

describe('outbox: a run-created event is never lost', () => {
  let h: Harness;
  let f: Fixture;
  let redis: Redis;
  let queue: Queue;
  const workers: RunningWorker[] = [];

  async function outboxRows(runId: string): Promise<OutboxRow[]> {
    return h.orm.em
      .fork()
      .getConnection()
      .execute<OutboxRow[]>(
        `select id, topic, aggregate_id, payload, published_at, publish_attempts from outbox_events where aggregate_id = ? order by id`,
        [runId],
      );
  }

  /** Every job for `runId`, whatever its state. */
  async function jobsForRun(runId: string): Promise<Job[]> {
    const jobs = await queue.getJobs(['active', 'completed', 'delayed', 'failed', 'prioritized', 'wait', 'waiting-children']);
    return jobs.filter((job) => (job.data as { runId?: string }).runId === runId);
  }

  /** Other sessions' FOR UPDATE claims on this database's outbox_events (pg_locks spans every database). */
  async function rowLocksOnOutbox(): Promise<number> {
    const [row] = await h.orm.em
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
    const dead = new Queue(QUEUES.runs, { connection: client, prefix: h.config.queuePrefix });
    dead.on('error', () => undefined);
    return {
      queue: dead,
      async close() {
        await dead.close();
        client.disconnect();
      },
    };
  }

  const postRun = (message: string): Promise<string> => postRunIn(h, f, message);

  /** A run.advance event for the run, recorded as the API and the trigger record theirs (with its NOTIFY). */
  async function wakeWithEvent(runId: string): Promise<void> {
    await h.orm.em.fork().transactional((tx) => recordOutboxEvent(tx, JOBS.runAdvance, runId));
  }

  async function start(config: Config = h.config): Promise<RunningWorker> {
    const worker = await startWorker({ config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
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
    const state = await queue.getJobState(runCreatedJobId(runId));
    return state === 'completed' ? queue.getJob(runCreatedJobId(runId)) : undefined;
  };

  beforeAll(async () => {
    disconnectTimers.track();
    h = await startHarness();
    f = await seedOrganization(h, 'outbox');
    redis = new Redis(h.config.redisUrl, { maxRetriesPerRequest: null });
    queue = new Queue(QUEUES.runs, { connection: redis, prefix: h.config.queuePrefix });
  });

  // A failed assertion must not leave a worker running into the next test.
  afterEach(async () => {
    for (const worker of workers.splice(0)) await worker.close();
  });

  afterAll(async () => {
    await closeQueue(queue, redis);
    await h?.close();
    await disconnectTimers.settle();
  });

  it('a run created with no worker running is kept in the outbox, then published by the worker', async () => {
    const runId = await postRun('no worker yet');

    const [row, ...others] = await outboxRows(runId);
    expect(others).toEqual([]);
    expect(row).toMatchObject({ topic: JOBS.runCreated, aggregate_id: runId, payload: { runId }, published_at: null, publish_attempts: 0 });
    expect(await queue.getJob(runCreatedJobId(runId))).toBeUndefined();

    const worker = await start();
    const job = await eventually(completedJob(runId));
    expect(job.id).toBe(runCreatedJobId(runId));
    expect(job.name).toBe(JOBS.runCreated);
    expect(job.data).toEqual({ runId });
    expect(job.returnvalue).toBe(0); // a run without tasks has nothing to dispatch

    const [published] = await eventually(publishedRow(runId));
    expect(Number.isNaN(new Date(published?.published_at ?? 'invalid').getTime())).toBe(false);
    expect(published?.publish_attempts).toBe(1);
    await stop(worker);
  });

  it('a run created while the worker runs is published and processed', async () => {
    const worker = await start();
    const runId = await postRun('worker running');
    const job = await eventually(completedJob(runId));
    expect(job.returnvalue).toBe(0); // a run without tasks has nothing to dispatch
    await eventually(publishedRow(runId));
    await stop(worker);
  });

  it('publishing twice is harmless: one job per run (deterministic job id)', async () => {
    const runId = await postRun('published twice');
    // A relay that is never started: only the explicit drains below publish.
    const relay = new OutboxRelay({ orm: h.orm, queue, databaseUrl: h.config.databaseUrl, pollIntervalMs: 60_000, logger: h.logger });

    expect(await relay.drain()).toBe(1);
    const [first] = await outboxRows(runId);
    expect(first?.published_at).not.toBeNull();
    const job = await queue.getJob(runCreatedJobId(runId));
    expect(job?.data).toEqual({ runId });
    // The relay's jobs are retried as the workers' own are.
    expect(job?.opts.attempts).toBe(JOB_OPTIONS.attempts);
    const firstTimestamp = job?.timestamp;

    // Nothing pending: a second drain publishes nothing.
    expect(await relay.drain()).toBe(0);

    // A crash between "Redis accepted" and "marked published" leaves the row unpublished: it is published again.
    await h.orm.em.fork().getConnection().execute(`update outbox_events set published_at = null where aggregate_id = ?`, [runId]);
    // And a duplicate event for the same run, published in the same batch.
    await h.orm.em
      .fork()
      .getConnection()
      .execute(`insert into outbox_events (topic, aggregate_id, payload, created_at) values (?, ?, ?::jsonb, now())`, [
        JOBS.runCreated,
        runId,
        JSON.stringify({ runId }),
      ]);
    expect(await relay.drain()).toBe(2);

    const rows = await outboxRows(runId);
    expect(rows).toHaveLength(2);
    expect(rows.every((row) => row.published_at !== null)).toBe(true);
    expect(rows[0]?.publish_attempts).toBe(2);

    const jobs = await jobsForRun(runId);
    expect(jobs.map((j) => j.id)).toEqual([runCreatedJobId(runId)]);
    expect(jobs[0]?.timestamp).toBe(firstTimestamp);

    // A worker processes that one job once; a further drain still adds nothing.
    const worker = await start();
    await eventually(completedJob(runId));
    expect(await worker.relay.drain()).toBe(0);
    expect((await jobsForRun(runId)).map((j) => j.id)).toEqual([runCreatedJobId(runId)]);
    await stop(worker);
  });

  it('a batch is added to the queue oldest event first', async () => {
    const runId = 'run-outbox-order';
    const relay = new OutboxRelay({ orm: h.orm, queue, databaseUrl: h.config.databaseUrl, pollIntervalMs: 60_000, logger: h.logger });
    const events = await h.orm.em
      .fork()
      .getConnection()
      .execute<Array<{ id: string }>>(
        `insert into outbox_events (topic, aggregate_id, payload, created_at)
         select ?, ?, ?::jsonb, now() from generate_series(1, 5) returning id`,
        [JOBS.runAdvance, runId, JSON.stringify({ runId })],
      );
    expect(await relay.drain()).toBe(5);
    // With no worker running, the jobs wait in the order they were added.
    const waiting = (await queue.getJobs(['wait'], 0, -1, true)).filter((job) => (job.data as { runId?: string }).runId === runId);
    try {
      expect(waiting.map((job) => job.id)).toEqual(events.map((event) => outboxJobId(JOBS.runAdvance, runId, event.id)));
    } finally {
      for (const job of waiting) await job.remove();
    }
  });

  it('a listener connection that PostgreSQL drops is re-established: events are published at once again, not at the next poll', async () => {
    // A 60 s poll: within the deadlines below only LISTEN can wake this relay.
    const relay = new OutboxRelay({ orm: h.orm, queue, databaseUrl: h.config.databaseUrl, pollIntervalMs: 60_000, logger: h.logger });
    await relay.start();
    try {
      const listeners = async (): Promise<number[]> =>
        (
          await h.orm.em
            .fork()
            .getConnection()
            .execute<{ pid: number }[]>(
              `select pid from pg_stat_activity where datname = current_database() and query ilike 'listen %' and pid <> pg_backend_pid()`,
            )
        ).map((row) => row.pid);
      const [pid] = await eventually(async () => ((await listeners()).length === 1 ? listeners() : undefined));
      // A run's creation has no NOTIFY (the API publishes its job itself); a run.advance event has one,
      // and the relay it wakes publishes the run's run.created event with it.
      const before = await postRun('before the listener is killed');
      await wakeWithEvent(before);
      await eventually(publishedRow(before), 5_000);

      await h.orm.em.fork().getConnection().execute(`select pg_terminate_backend(?)`, [pid]);
      // A new listener, on a new connection.
      await eventually(async () => {
        const now = await listeners();
        return now.length === 1 && now[0] !== pid ? true : undefined;
      }, 10_000);
      const after = await postRun('after the listener came back');
      await wakeWithEvent(after);
      await eventually(publishedRow(after), 5_000);
    } finally {
      await relay.stop();
    }
  });

  it('a relay waiting for Redis holds its claim; other relays skip those rows until it gives up', async () => {
    const runId = await postRun('claimed by a stuck relay');
    const dead = deadQueue();
    const stuck = new OutboxRelay({
      orm: h.orm,
      queue: dead.queue,
      databaseUrl: h.config.databaseUrl,
      pollIntervalMs: 60_000,
      logger: h.logger,
      publishTimeoutMs: 60_000,
    });
    const healthy = new OutboxRelay({ orm: h.orm, queue, databaseUrl: h.config.databaseUrl, pollIntervalMs: 60_000, logger: h.logger });
    try {
      const stuckDrain = stuck.drain();
      stuckDrain.catch(() => undefined);
      // The claim is a transaction holding FOR UPDATE row locks on the outbox while Redis is awaited.
      await eventually(async () => ((await rowLocksOnOutbox()) > 0 ? true : undefined));
      expect(await healthy.drain()).toBe(0);
      expect((await outboxRows(runId))[0]?.published_at).toBeNull();

      // Stopping abandons the unacknowledged publication: the claim rolls back and nothing is lost.
      await stuck.stop();
      await expect(stuckDrain).rejects.toThrow('stopped');
      expect(await rowLocksOnOutbox()).toBe(0);
      expect((await outboxRows(runId))[0]).toMatchObject({ published_at: null, publish_attempts: 0 });

      expect(await healthy.drain()).toBe(1);
      expect((await outboxRows(runId))[0]?.publish_attempts).toBe(1);
      expect((await queue.getJob(runCreatedJobId(runId)))?.data).toEqual({ runId });
    } finally {
      await stuck.stop();
      await dead.close();
    }
  });

  it('with Redis unreachable, runs are still created and their events wait in the outbox until Redis is back', async () => {
    const down = await start({ ...h.config, redisUrl: UNREACHABLE_REDIS_URL });
    // This API publishes nothing itself (built without its operations, as one whose Redis is down
    // publishes nothing): creating runs still answers 201.
    const runIds = [await postRun('redis down, first'), await postRun('redis down, second')];
    for (const runId of runIds) {
      const rows = await outboxRows(runId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ payload: { runId }, published_at: null, publish_attempts: 0 });
      expect(await queue.getJob(runCreatedJobId(runId))).toBeUndefined();
    }
    // Stopping must not wait for Redis (its relay may be mid-publication, its worker cannot reach Redis).
    await stop(down);

    // A relay that cannot reach Redis gives up on its claim: the transaction rolls back, nothing is marked published.
    const dead = deadQueue();
    const deadRelay = new OutboxRelay({
      orm: h.orm,
      queue: dead.queue,
      databaseUrl: h.config.databaseUrl,
      pollIntervalMs: 60_000,
      logger: h.logger,
      publishTimeoutMs: 200,
    });
    try {
      await expect(deadRelay.drain()).rejects.toThrow('did not accept');
    } finally {
      await deadRelay.stop();
      await dead.close();
    }
    expect(await rowLocksOnOutbox()).toBe(0);
    for (const runId of runIds) {
      const rows = await outboxRows(runId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ published_at: null, publish_attempts: 0 });
    }

    // With Redis back, a worker publishes and processes them (the failed claims left no locks behind).
    const up = await start();
    for (const runId of runIds) {
      const job = await eventually(completedJob(runId));
      expect(job.data).toEqual({ runId });
      expect(job.returnvalue).toBe(0); // a run without tasks has nothing to dispatch
      const [row] = await eventually(publishedRow(runId));
      expect(row?.publish_attempts).toBe(1);
    }
    await stop(up);
  });
});

/**
 * The API, with its operations (as main.ts builds it), publishes a run's run.created job itself once the
 * run has committed, so the first task request does not wait for the relay; the outbox event stays the
 * net for a publication that did not happen (a crash after commit, Redis down), under the same job id.
 */
describe('outbox: the API publishes a created run at once', () => {
  let h: Harness;
  let f: Fixture;
  let redis: Redis;
  let queue: Queue;

  beforeAll(async () => {
    h = await startHarness({ ops: true });
    f = await seedOrganization(h, 'publish-at-once');
    redis = new Redis(h.config.redisUrl, { maxRetriesPerRequest: null });
    queue = new Queue(QUEUES.runs, { connection: redis, prefix: h.config.queuePrefix });
  });

  afterAll(async () => {
    await closeQueue(queue, redis);
    await h?.close();
  });

  const unpublished = async (harness: Harness, runId: string): Promise<number> => {
    const [row] = await harness.orm.em
      .fork()
      .getConnection()
      .execute<{ count: number }[]>(`select count(*)::int as count from outbox_events where aggregate_id = ? and published_at is null`, [
        runId,
      ]);
    return row?.count ?? -1;
  };

  it("adds the job with no relay running; the relay's later publication of the event is a no-op", async () => {
    // No worker and no relay: only the API can have added it.
    const runId = await postRunIn(h, f, 'published by the API');
    const job = await eventually(() => queue.getJob(runCreatedJobId(runId)));
    expect(job.name).toBe(JOBS.runCreated);
    expect(job.data).toEqual({ runId });
    expect(job.opts.removeOnComplete).toEqual(JOB_OPTIONS.removeOnComplete);
    // Retried like every other job, so a passing fault does not leave the run to the sweeper.
    expect(job.opts.attempts).toBe(JOB_OPTIONS.attempts);
    expect(job.opts.backoff).toEqual(JOB_OPTIONS.backoff);
    expect(await unpublished(h, runId)).toBe(1);

    const relay = new OutboxRelay({ orm: h.orm, queue, databaseUrl: h.config.databaseUrl, pollIntervalMs: 60_000, logger: h.logger });
    try {
      expect(await relay.drain()).toBe(1);
    } finally {
      await relay.stop();
    }
    expect(await unpublished(h, runId)).toBe(0);
    const jobs = (await queue.getJobs(['wait', 'active', 'completed', 'failed', 'delayed', 'prioritized'])).filter(
      (each) => (each.data as { runId?: string }).runId === runId,
    );
    expect(jobs.map((each) => each.id)).toEqual([runCreatedJobId(runId)]);
  });

  it("publishes the run an upload queues (auto-queue-runs) once the upload's transaction has committed", async () => {
    const version = await api(h, 'post', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken, {
      data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': true } },
    });
    expect(version.status).toBe(201);
    const archive = configurationArchive();
    // The upload URL is absolute and tokenless, as go-tfe uses it.
    const uploadPath = new URL(String(version.body.data.attributes['upload-url'])).pathname;
    expect((await h.http.put(uploadPath).set('Content-Type', 'application/octet-stream').send(archive)).status).toBe(200);
    const [queued] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ id: string }[]>(`select id from runs where configuration_version_id = ?`, [version.body.data.id]);
    const runId = queued?.id ?? '';
    // No worker and no relay: only the API can have added it.
    const job = await eventually(() => queue.getJob(runCreatedJobId(runId)));
    expect(job.data).toEqual({ runId });
    expect(await unpublished(h, runId)).toBe(1);
  });

  it('with its Redis unreachable, a create answers 201 and leaves the event to the relay', async () => {
    const timers = new SocketDestroyTimers();
    timers.track();
    const down = await startHarness({ ops: true, env: { REDIS_URL: UNREACHABLE_REDIS_URL } });
    try {
      const fixture = await seedOrganization(down, 'publish-redis-down');
      const runId = await postRunIn(down, fixture, 'redis down');
      expect(await unpublished(down, runId)).toBe(1);
    } finally {
      await down.close();
      await timers.settle();
    }
  });
});
