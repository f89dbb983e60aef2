import type { MikroORM } from '@mikro-orm/postgresql';
import { createTaskClient, type DeliveryOutcome, type TaskClient } from '@runtasks/shared/outbound';
import {
  disconnectAll,
  jobBackoff,
  JOB_RETENTION,
  JOBS,
  MAX_RECONNECT_DELAY_MS,
  QUEUES,
  whenAllReady,
  workerConnection,
  type JobName,
} from '@runtasks/shared/queue';
import { genericIndexPoolOrBase, isBackingServiceUnavailable, nativePool } from '@runtasks/shared/db';
import { issueCallbackToken, type SecretBox } from '@runtasks/shared/security';
import { Metrics } from '@runtasks/shared/ops';
import { type Config } from '@runtasks/shared/config';
import { type Logger } from '@runtasks/shared/logger';
import {
  Acknowledgements,
  ATTEMPT_LEASE_MS,
  immediateExecutor,
  resultDeadlines,
  stageDeadlineScheduler,
  type DispatchDeps,
  type RunExecutor,
} from '@runtasks/shared/engine';
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Pool } from 'pg';
import type { JobContext, JobData } from './jobs/context.ts';
import { PROCESSORS } from './jobs/processors.ts';
import { OutboxRelay } from './outbox-relay.ts';

export interface WorkerDeps {
  config: Config;
  orm: MikroORM;
  logger: Logger;
  secrets: SecretBox;
  /** Built from the configuration when not given (tests inject their own). */
  taskClient?: TaskClient;
  executor?: RunExecutor;
  /** Shared with the API when both run in one process. */
  metrics?: Metrics;
}

export interface RunningWorker {
  queue: Queue;
  relay: OutboxRelay;
  metrics: Metrics;
  close(): Promise<void>;
}

/** Longer than a worker connection's longest wait between reconnection attempts. */
const RECONNECT_WAIT_MS = MAX_RECONNECT_DELAY_MS + 1_000;

/** The Redis connections of one worker, each reporting its errors and kept for the close. */
function redisConnections(deps: WorkerDeps): { connections: Redis[]; connection: () => Redis } {
  const connections: Redis[] = [];
  const connection = (): Redis => {
    const client = workerConnection(deps.config.redisUrl, (copy) => connections.push(copy));
    client.on('error', (error) => deps.logger.warn({ err: error }, 'redis connection error'));
    connections.push(client);
    return client;
  };
  return { connections, connection };
}

/** The deliveries' dependencies; acknowledgements go through `pool`, as the advances' statements do. */
function dispatchDependencies(deps: WorkerDeps, taskClient: TaskClient, pool: Pool, metrics: Metrics): DispatchDeps {
  return {
    secrets: deps.secrets,
    taskClient,
    publicBaseUrl: deps.config.publicBaseUrl,
    retryDelaysMs: deps.config.taskRetryDelaysMs,
    // On the advances' pool too: left to choose, PostgreSQL plans this statement for its arrays at
    // every execution (each acknowledgement batch), which doubles its cost on the server.
    acknowledgements: new Acknowledgements(pool),
    onDelivery: (outcome: DeliveryOutcome) => {
      const label = outcome.kind === 'response' ? (outcome.status === 200 ? 'acknowledged' : `http_${outcome.status}`) : outcome.errorKind;
      metrics.taskRequestDuration.observe({ outcome: label }, outcome.durationMs / 1000);
    },
  };
}

/**
 * The advances' statements, planned generically and by index (see genericIndexPool). Each holds a
 * connection for one statement only, so half the main pool's size serves them.
 */
async function advancePool(deps: WorkerDeps): Promise<{ pool: Pool; end: () => Promise<void> }> {
  return genericIndexPoolOrBase(await nativePool(deps.orm.em), Math.max(1, Math.ceil(deps.config.databasePoolSize / 2)), (error) =>
    deps.logger.warn(
      { err: error },
      "the database refused the advances' session settings (a pooler that does not track them?): advances run on the main pool",
    ),
  );
}

/** Runs each job through its processor, timed; unknown jobs are refused loudly rather than completed silently. */
function processJob(context: JobContext, metrics: Metrics) {
  return async (job: Job<JobData>): Promise<unknown> => {
    const processor = PROCESSORS[job.name as JobName];
    if (!processor) throw new UnrecoverableError(`no processor for job ${job.name}`);
    const stopTimer = metrics.jobDuration.startTimer({ name: job.name });
    try {
      const result = await processor(context, job);
      stopTimer({ outcome: 'completed' });
      return result;
    } catch (error) {
      stopTimer({ outcome: 'failed' });
      throw error;
    }
  };
}

/** The sweeper's schedule, kept across Redis restarts, and the queue's and worker's events, logged. */
function watch(deps: WorkerDeps, queue: Queue, queueClient: Redis, worker: Worker<JobData>): void {
  // Not awaited: with Redis down this waits for it to come back, and start-up must not.
  const scheduleSweeper = (): void => {
    queue
      .upsertJobScheduler(JOBS.sweep, { every: deps.config.sweeperIntervalMs }, { name: JOBS.sweep, data: {}, opts: JOB_RETENTION })
      .catch((error: unknown) => deps.logger.warn({ err: error }, 'could not schedule the sweeper'));
  };
  scheduleSweeper();
  // A Redis that comes back empty (restarted without persistence, failed over) lost the schedule with
  // every job, and the sweeper is what re-drives those: set it again on every reconnection (idempotent).
  queueClient.on('ready', scheduleSweeper);
  // Without listeners BullMQ prints these with console.error, past the logger and LOG_LEVEL.
  queue.on('error', (error) => deps.logger.warn({ err: error }, 'queue error'));
  worker.on('error', (error) => deps.logger.warn({ err: error }, 'worker error'));
  worker.on('failed', (job, error) => {
    const details = { err: error, jobId: job?.id, jobName: job?.name, attemptsMade: job?.attemptsMade };
    // A job moved to the failed set has finished; one that will be retried has not. An outage's retries are
    // expected (and told once by the connections' own warnings), so they are no error of the job's.
    if (typeof job?.finishedOn === 'number') deps.logger.error(details, 'job failed');
    else if (isBackingServiceUnavailable(error)) deps.logger.debug(details, 'job retried: a backing service is unavailable');
    else deps.logger.warn(details, 'job attempt failed; retried');
  });
}

export async function startWorker(deps: WorkerDeps): Promise<RunningWorker> {
  const { connections, connection } = redisConnections(deps);
  const prefix = deps.config.queuePrefix;
  const queueClient = connection();
  const queue = new Queue(QUEUES.runs, { connection: queueClient, prefix });
  const workerClient = connection();
  const taskClient = deps.taskClient ?? createTaskClient({ allowlist: deps.config.taskDestinationAllowlist });
  const deadlines = resultDeadlines(deps.config);
  const metrics = deps.metrics ?? new Metrics();
  const advanceDb = await advancePool(deps);
  const context: JobContext = {
    config: deps.config,
    orm: deps.orm,
    logger: deps.logger,
    secrets: deps.secrets,
    queue,
    executor: deps.executor ?? immediateExecutor,
    settings: {
      ...deadlines,
      attemptLeaseSeconds: ATTEMPT_LEASE_MS / 1000,
      issueToken: (resultId: string) => issueCallbackToken(deps.secrets, resultId),
      localExecutionTimeoutSeconds: deps.config.localExecutionTimeoutSeconds,
    },
    advanceDb: advanceDb.pool,
    dispatchDeps: dispatchDependencies(deps, taskClient, advanceDb.pool, metrics),
    stageDeadlines: stageDeadlineScheduler(queue, deadlines),
    graceSeconds: Math.max(1, (2 * deps.config.sweeperIntervalMs) / 1000),
    sweep: { idleCursor: undefined },
  };

  const worker = new Worker<JobData>(QUEUES.runs, processJob(context, metrics), {
    connection: workerClient,
    prefix,
    concurrency: deps.config.workerConcurrency,
    settings: {
      backoffStrategy: (failures, _type, error, job) => jobBackoff(failures, error, job ?? { timestamp: 0, opts: {} }, Date.now()),
    },
  });
  watch(deps, queue, queueClient, worker);
  const relay = new OutboxRelay({
    orm: deps.orm,
    queue,
    databaseUrl: deps.config.databaseUrl,
    pollIntervalMs: deps.config.outboxPollIntervalMs,
    logger: deps.logger,
  });
  await relay.start();
  metrics.watchQueue(queue);
  return {
    queue,
    relay,
    metrics,
    async close() {
      await relay.stop();
      // A graceful close waits for the active jobs and for BullMQ's blocking connection to end. A
      // connection between two reconnection attempts never ends (ioredis emits no 'end' then), so it
      // would never return: wait a little for every connection to be back (each retries at least every
      // MAX_RECONNECT_DELAY_MS); with Redis still away, close at once and the active jobs come back as stalled elsewhere.
      const connected = await whenAllReady(connections, RECONNECT_WAIT_MS);
      await worker.close(!connected);
      await queue.close();
      await disconnectAll(connections, RECONNECT_WAIT_MS);
      await advanceDb.end();
      if (!deps.taskClient) await taskClient.close();
    },
  };
}
