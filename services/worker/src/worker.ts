import type { MikroORM } from '@mikro-orm/postgresql';
import { createTaskClient, type DeliveryOutcome, type TaskClient } from '@runtasks/shared/outbound';
import {
  disconnectAll,
  jobBackoff,
  JOB_RETENTION,
  JOBS,
  MAX_RECONNECT_DELAY_MS,
  QUEUES,
  RedisConnections,
  whenAllReady,
  type JobName,
  type RedisClient,
} from '@runtasks/shared/queue';
import { genericIndexPoolOrBase, isBackingServiceUnavailable, nativePool } from '@runtasks/shared/db';
import { issueCallbackToken, type SecretBox } from '@runtasks/shared/security';
import { Metrics } from '@runtasks/shared/ops';
import { storageUsage } from '@runtasks/shared/storage';
import { createMailer, deliverySettler } from '@runtasks/shared/notifications';
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
import type { Pool } from 'pg';
import type { JobContext, JobData } from './jobs/context.ts';
import { PROCESSORS } from './jobs/processors.ts';
import { WatchedWorker } from './fetch-watchdog.ts';
import { OutboxRelay } from './outbox-relay.ts';
import { RunLoad, sampledLoopUtilization } from './run-load.ts';

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
  /** The process's Redis connections (shared with the API in one process); made from the configuration when not given. */
  redis?: RedisConnections;
  /** How long a stopped fetch loop goes unnoticed (FETCH_STALL_MS unless set; tests shorten it). */
  fetchStallMs?: number;
}

export interface RunningWorker {
  queue: Queue;
  /** Notification jobs' own queue. */
  notificationQueue: Queue;
  relay: OutboxRelay;
  metrics: Metrics;
  /** The BullMQ workers of the runs' and the notifications' queues, each watched for a stopped fetch loop. */
  workers: { runs: WatchedWorker<JobData>; notifications: WatchedWorker<JobData> };
  close(): Promise<void>;
}

/** Longer than a worker connection's longest wait between reconnection attempts. */
const RECONNECT_WAIT_MS = MAX_RECONNECT_DELAY_MS + 1_000;

/** The worker's own Redis connections (durable ones, with those BullMQ derives), kept for its close. */
function workerConnections(redis: RedisConnections): { connections: RedisClient[]; connection: () => RedisClient } {
  const connections: RedisClient[] = [];
  const connection = (): RedisClient => {
    const client = redis.open('durable', { onDuplicate: (copy) => connections.push(copy) });
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

/** How often the audit trail is pruned of events past their retention. */
const AUDIT_PRUNE_INTERVAL_MS = 3_600_000;

/** The sweeper's schedule, kept across Redis restarts, and the queue's events, logged. */
function watch(deps: WorkerDeps, redis: RedisConnections, queue: Queue, queueClient: RedisClient): void {
  // Not awaited: with Redis down this waits for it to come back, and start-up must not.
  const scheduleSweeper = (): void => {
    queue
      .upsertJobScheduler(JOBS.sweep, { every: deps.config.sweeperIntervalMs }, { name: JOBS.sweep, data: {}, opts: JOB_RETENTION })
      .catch((error: unknown) => redis.availability.report(error, 'could not schedule the sweeper'));
    // The audit trail's pruning, hourly: one scheduler for every worker, as the sweeper's. (An `every`
    // schedule runs its first job at once by itself; BullMQ warns on stdout when told `immediately` too.)
    queue
      .upsertJobScheduler(JOBS.auditPrune, { every: AUDIT_PRUNE_INTERVAL_MS }, { name: JOBS.auditPrune, data: {}, opts: JOB_RETENTION })
      .catch((error: unknown) => redis.availability.report(error, 'could not schedule the audit trail pruning'));
  };
  scheduleSweeper();
  // A Redis that comes back empty (restarted without persistence, failed over) lost the schedule with
  // every job, and the sweeper is what re-drives those: set it again on every reconnection (idempotent).
  queueClient.on('ready', scheduleSweeper);
  // Without listeners BullMQ prints these with console.error, past the logger and LOG_LEVEL. Those that
  // only say Redis is away are part of the outage's two warnings.
  queue.on('error', (error) => redis.availability.report(error, 'queue error'));
}

/** A worker's errors and failed jobs, logged (see watch). */
function watchWorker(deps: WorkerDeps, redis: RedisConnections, worker: Worker<JobData>): void {
  worker.on('error', (error) => redis.availability.report(error, 'worker error'));
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
  const redis = deps.redis ?? new RedisConnections(deps.config, deps.logger);
  const { connections, connection } = workerConnections(redis);
  const prefix = deps.config.queuePrefix;
  const queueClient = connection();
  const queue = new Queue(QUEUES.runs, { connection: queueClient, prefix });
  const notificationQueue = new Queue(QUEUES.notifications, { connection: queueClient, prefix });
  const taskClient = deps.taskClient ?? createTaskClient({ allowlist: deps.config.taskDestinationAllowlist });
  const deadlines = resultDeadlines(deps.config);
  const metrics = deps.metrics ?? new Metrics();
  const advanceDb = await advancePool(deps);
  const mailer = createMailer(deps.config.smtpUrl, deps.config.smtpFrom);
  const context: JobContext = {
    config: deps.config,
    orm: deps.orm,
    logger: deps.logger,
    secrets: deps.secrets,
    queue,
    notificationQueue,
    executor: deps.executor ?? immediateExecutor,
    settings: {
      ...deadlines,
      attemptLeaseSeconds: ATTEMPT_LEASE_MS / 1000,
      issueToken: (resultId: string) => issueCallbackToken(deps.secrets, resultId),
      localTimeouts: deps.config.localTimeouts,
    },
    advanceDb: advanceDb.pool,
    dispatchDeps: dispatchDependencies(deps, taskClient, advanceDb.pool, metrics),
    stageDeadlines: stageDeadlineScheduler(queue, deadlines),
    graceSeconds: Math.max(1, (2 * deps.config.sweeperIntervalMs) / 1000),
    sweep: { idleCursor: undefined },
    notifications: {
      // The same guarded client as task requests: the same destinations are allowed.
      senders: { client: taskClient, mailer, timeoutMs: deps.config.taskVerificationTimeoutSeconds * 1000 },
      secrets: deps.secrets,
      publicBaseUrl: deps.config.publicBaseUrl,
      retryDelaysMs: deps.config.notificationRetryDelaysMs,
      settle: deliverySettler(await nativePool(deps.orm.em)),
    },
  };

  // Notification jobs give way to the runs' while this process's run engine is busy (run-load.ts).
  const loop = sampledLoopUtilization();
  const runLoad = new RunLoad(deps.config.workerConcurrency, loop.utilization);
  // Each queue's BullMQ worker, replaced should its fetch loop stop (fetch-watchdog.ts).
  const watched = (name: string, jobQueue: Queue<JobData>, concurrency: number, processor: (job: Job<JobData>) => Promise<unknown>) =>
    new WatchedWorker<JobData>({
      queue: jobQueue,
      processor,
      concurrency,
      availability: redis.availability,
      logger: deps.logger,
      stallMs: deps.fetchStallMs,
      create: (processor) => {
        const client = connection();
        const worker = new Worker<JobData>(name, processor, {
          connection: client,
          prefix,
          concurrency,
          settings: {
            backoffStrategy: (failures, _type, error, job) => jobBackoff(failures, error, job ?? { timestamp: 0, opts: {} }, Date.now()),
          },
        });
        watchWorker(deps, redis, worker);
        return { worker, retire: () => redis.retire(client), release: () => client.disconnect() };
      },
    });
  const worker = watched(QUEUES.runs, queue, deps.config.workerConcurrency, runLoad.counting(processJob(context, metrics)));
  // Notifications on a queue of their own, at their own modest concurrency: a slow or unreachable
  // destination holds at most these slots, never the run engine's (docs/notifications.md, "Delivery").
  const notificationWorker = watched(
    QUEUES.notifications,
    notificationQueue,
    deps.config.notificationConcurrency,
    runLoad.behind(processJob(context, metrics)),
  );
  watch(deps, redis, queue, queueClient);
  notificationQueue.on('error', (error) => redis.availability.report(error, 'queue error'));
  const relay = new OutboxRelay({
    orm: deps.orm,
    queue,
    notificationQueue,
    databaseUrl: deps.config.databaseUrl,
    pollIntervalMs: deps.config.outboxPollIntervalMs,
    logger: deps.logger,
    redisAvailability: redis.availability,
  });
  await relay.start();
  metrics.watchQueue(queue);
  metrics.watchQueue(notificationQueue);
  metrics.watchStorage(async () => storageUsage(await nativePool(deps.orm.em)));
  return {
    queue,
    notificationQueue,
    relay,
    metrics,
    workers: { runs: worker, notifications: notificationWorker },
    async close() {
      loop.stop();
      await relay.stop();
      // A graceful close waits for the active jobs and for BullMQ's blocking connection to end. A
      // connection between two reconnection attempts never ends (ioredis emits no 'end' then), so it
      // would never return: wait a little for every connection to be back (each retries at least every
      // MAX_RECONNECT_DELAY_MS); with Redis still away, close at once and the active jobs come back as stalled elsewhere.
      const connected = await whenAllReady(connections, RECONNECT_WAIT_MS);
      await Promise.all([worker.close(!connected), notificationWorker.close(!connected)]);
      await Promise.all([queue.close(), notificationQueue.close()]);
      await disconnectAll(connections, RECONNECT_WAIT_MS);
      if (!deps.redis) await redis.close(RECONNECT_WAIT_MS);
      await advanceDb.end();
      if (!deps.taskClient) await taskClient.close();
      mailer?.transport.close();
    },
  };
}
