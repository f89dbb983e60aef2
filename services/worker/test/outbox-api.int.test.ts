import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { JOB_OPTIONS, JOBS, QUEUES, runCreatedJobId } from '@runtasks/shared/queue';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { configurationArchive } from '../../../test/support/archives.ts';
import { api, eventually, type Fixture, seedOrganization } from '../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../test/support/harness.ts';
import { SocketDestroyTimers } from '../../../test/support/ioredis-timers.ts';
import { OutboxRelay } from '../src/outbox-relay.ts';
import { closeQueue, postRunIn, UNREACHABLE_REDIS_URL } from './outbox/helpers.ts';

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
