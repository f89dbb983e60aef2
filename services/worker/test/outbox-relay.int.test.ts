import { describe, expect, it } from '@jest/globals';
import { JOB_OPTIONS, JOBS, outboxJobId, runCreatedJobId } from '@runtasks/shared/queue';
import { eventually } from '../../../test/support/fixtures.ts';
import { OutboxRelay } from '../src/outbox-relay.ts';
import { UNREACHABLE_REDIS_URL } from './outbox/helpers.ts';
import { useOutboxRelay } from './outbox/relay-setup.ts';

describe('outbox: a run-created event is never lost', () => {
  const g = useOutboxRelay();
  const { outboxRows, jobsForRun, rowLocksOnOutbox, deadQueue, postRun, wakeWithEvent, start, stop, publishedRow, completedJob } = g;

  it('a run created with no worker running is kept in the outbox, then published by the worker', async () => {
    const runId = await postRun('no worker yet');

    const [row, ...others] = await outboxRows(runId);
    expect(others).toEqual([]);
    expect(row).toMatchObject({ topic: JOBS.runCreated, aggregate_id: runId, payload: { runId }, published_at: null, publish_attempts: 0 });
    expect(await g.queue.getJob(runCreatedJobId(runId))).toBeUndefined();

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
    const relay = new OutboxRelay({
      orm: g.h.orm,
      queue: g.queue,
      databaseUrl: g.h.config.databaseUrl,
      pollIntervalMs: 60_000,
      logger: g.h.logger,
    });

    expect(await relay.drain()).toBe(1);
    const [first] = await outboxRows(runId);
    expect(first?.published_at).not.toBeNull();
    const job = await g.queue.getJob(runCreatedJobId(runId));
    expect(job?.data).toEqual({ runId });
    // The relay's jobs are retried as the workers' own are.
    expect(job?.opts.attempts).toBe(JOB_OPTIONS.attempts);
    const firstTimestamp = job?.timestamp;

    // Nothing pending: a second drain publishes nothing.
    expect(await relay.drain()).toBe(0);

    // A crash between "Redis accepted" and "marked published" leaves the row unpublished: it is published again.
    await g.h.orm.em.fork().getConnection().execute(`update outbox_events set published_at = null where aggregate_id = ?`, [runId]);
    // And a duplicate event for the same run, published in the same batch.
    await g.h.orm.em
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
    const relay = new OutboxRelay({
      orm: g.h.orm,
      queue: g.queue,
      databaseUrl: g.h.config.databaseUrl,
      pollIntervalMs: 60_000,
      logger: g.h.logger,
    });
    const events = await g.h.orm.em
      .fork()
      .getConnection()
      .execute<Array<{ id: string }>>(
        `insert into outbox_events (topic, aggregate_id, payload, created_at)
         select ?, ?, ?::jsonb, now() from generate_series(1, 5) returning id`,
        [JOBS.runAdvance, runId, JSON.stringify({ runId })],
      );
    expect(await relay.drain()).toBe(5);
    // With no worker running, the jobs wait in the order they were added.
    const waiting = (await g.queue.getJobs(['wait'], 0, -1, true)).filter((job) => (job.data as { runId?: string }).runId === runId);
    try {
      expect(waiting.map((job) => job.id)).toEqual(events.map((event) => outboxJobId(JOBS.runAdvance, runId, event.id)));
    } finally {
      for (const job of waiting) await job.remove();
    }
  });

  it('a listener connection that PostgreSQL drops is re-established: events are published at once again, not at the next poll', async () => {
    // A 60 s poll: within the deadlines below only LISTEN can wake this relay.
    const relay = new OutboxRelay({
      orm: g.h.orm,
      queue: g.queue,
      databaseUrl: g.h.config.databaseUrl,
      pollIntervalMs: 60_000,
      logger: g.h.logger,
    });
    await relay.start();
    try {
      const listeners = async (): Promise<number[]> =>
        (
          await g.h.orm.em
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

      await g.h.orm.em.fork().getConnection().execute(`select pg_terminate_backend(?)`, [pid]);
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
      orm: g.h.orm,
      queue: dead.queue,
      databaseUrl: g.h.config.databaseUrl,
      pollIntervalMs: 60_000,
      logger: g.h.logger,
      publishTimeoutMs: 60_000,
    });
    const healthy = new OutboxRelay({
      orm: g.h.orm,
      queue: g.queue,
      databaseUrl: g.h.config.databaseUrl,
      pollIntervalMs: 60_000,
      logger: g.h.logger,
    });
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
      expect((await g.queue.getJob(runCreatedJobId(runId)))?.data).toEqual({ runId });
    } finally {
      await stuck.stop();
      await dead.close();
    }
  });

  it('with Redis unreachable, runs are still created and their events wait in the outbox until Redis is back', async () => {
    const down = await start({ ...g.h.config, redisUrl: UNREACHABLE_REDIS_URL });
    // This API publishes nothing itself (built without its operations, as one whose Redis is down
    // publishes nothing): creating runs still answers 201.
    const runIds = [await postRun('redis down, first'), await postRun('redis down, second')];
    for (const runId of runIds) {
      const rows = await outboxRows(runId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ payload: { runId }, published_at: null, publish_attempts: 0 });
      expect(await g.queue.getJob(runCreatedJobId(runId))).toBeUndefined();
    }
    // Stopping must not wait for Redis (its relay may be mid-publication, its worker cannot reach Redis).
    await stop(down);

    // A relay that cannot reach Redis gives up on its claim: the transaction rolls back, nothing is marked published.
    const dead = deadQueue();
    const deadRelay = new OutboxRelay({
      orm: g.h.orm,
      queue: dead.queue,
      databaseUrl: g.h.config.databaseUrl,
      pollIntervalMs: 60_000,
      logger: g.h.logger,
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
