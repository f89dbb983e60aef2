import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import {
  createTaskClient,
  disconnectAll,
  genericIndexPoolOrBase,
  isBackingServiceUnavailable,
  issueCallbackToken,
  jobBackoff,
  nativePool,
  JOB_OPTIONS,
  JOB_RETENTION,
  JOBS,
  MAX_RECONNECT_DELAY_MS,
  QUEUES,
  randomAlphanumeric,
  resultDeadlines,
  taskDispatchJobId,
  whenAllReady,
  workerConnection,
  Metrics,
  type Config,
  type DeliveryOutcome,
  type JobName,
  type Logger,
  type SecretBox,
  type TaskClient,
} from '@runtasks/shared';
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import {
  advanceRun,
  type StartedResult,
  BatchWriter,
  Acknowledgements,
  ATTEMPT_LEASE_MS,
  claimStartedAtCreation,
  deliverClaimed,
  dispatchResult,
  tokenOf,
  type DispatchOutcome,
  immediateExecutor,
  type RunExecutor,
  expireResults,
  sweep,
  type IdleRunCursor,
} from '@runtasks/shared/engine';
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

interface JobData {
  runId?: string;
  resultId?: string;
  /** run.created: the stage the API started as it created the run, whose first attempts are to deliver (and task.deadline's of earlier versions). */
  stageId?: string;
  /** task.deadline: the stages whose results' progress deadline it is (a result's id in jobs of earlier versions). */
  stageIds?: string[];
}

/** Stages in one deadline job at most. */
const DEADLINE_BATCH = 500;

/** Longer than a worker connection's longest wait between reconnection attempts. */
const RECONNECT_WAIT_MS = MAX_RECONNECT_DELAY_MS + 1_000;

const advanceJobId = (runId: string): string => `run-advance.${runId}.${Date.now()}${randomAlphanumeric(6)}`;

export async function startWorker(deps: WorkerDeps): Promise<RunningWorker> {
  const connections: Redis[] = [];
  const connection = (): Redis => {
    const client = workerConnection(deps.config.redisUrl, (copy) => connections.push(copy));
    client.on('error', (error) => deps.logger.warn({ err: error }, 'redis connection error'));
    connections.push(client);
    return client;
  };
  const prefix = deps.config.queuePrefix;
  const queueClient = connection();
  const queue = new Queue(QUEUES.runs, { connection: queueClient, prefix });
  const workerClient = connection();
  const taskClient = deps.taskClient ?? createTaskClient({ allowlist: deps.config.taskDestinationAllowlist });
  const executor = deps.executor ?? immediateExecutor;
  const settings = {
    ...resultDeadlines(deps.config),
    attemptLeaseSeconds: ATTEMPT_LEASE_MS / 1000,
    issueToken: (resultId: string) => issueCallbackToken(deps.secrets, resultId),
    localExecutionTimeoutSeconds: deps.config.localExecutionTimeoutSeconds,
  };
  const metrics = deps.metrics ?? new Metrics();
  // The advances' statements, planned generically and by index (see genericIndexPool). Each holds a
  // connection for one statement only, so half the main pool's size serves them.
  const advanceDb = await genericIndexPoolOrBase(
    await nativePool(deps.orm.em),
    Math.max(1, Math.ceil(deps.config.databasePoolSize / 2)),
    (error) =>
      deps.logger.warn(
        { err: error },
        "the database refused the advances' session settings (a pooler that does not track them?): advances run on the main pool",
      ),
  );
  const dispatchDeps = {
    secrets: deps.secrets,
    taskClient,
    publicBaseUrl: deps.config.publicBaseUrl,
    retryDelaysMs: deps.config.taskRetryDelaysMs,
    // On the advances' pool too: left to choose, PostgreSQL plans this statement for its arrays at
    // every execution (each acknowledgement batch), which doubles its cost on the server.
    acknowledgements: new Acknowledgements(advanceDb.pool),
    onDelivery: (outcome: DeliveryOutcome) => {
      const label = outcome.kind === 'response' ? (outcome.status === 200 ? 'acknowledged' : `http_${outcome.status}`) : outcome.errorKind;
      metrics.taskRequestDuration.observe({ outcome: label }, outcome.durationMs / 1000);
    },
  };
  const graceSeconds = Math.max(1, (2 * deps.config.sweeperIntervalMs) / 1000);
  // Where this worker's next sweep goes on looking at idle runs (each pass looks at a bounded number).
  let idleCursor: IdleRunCursor | undefined;

  // One delayed task.deadline job for the stages started while the previous one was being added (one
  // stage each when idle): under load, a handful of jobs a second instead of one per stage, in Redis
  // for the whole progress timeout. Added after the stages started, so it fires after their deadline.
  const stageDeadlines = new BatchWriter<string>(async (stageIds) => {
    const [first] = stageIds;
    await queue.add(
      JOBS.taskDeadline,
      { stageIds },
      {
        jobId: stageIds.length === 1 ? `task-deadline.${first}` : `task-deadline.${first}.and-${stageIds.length - 1}`,
        delay: settings.progressTimeoutSeconds * 1000 + 50,
        ...JOB_OPTIONS,
      },
    );
  }, DEADLINE_BATCH);

  const enqueueAdvance = (runId: string) => queue.add(JOBS.runAdvance, { runId }, { jobId: advanceJobId(runId), ...JOB_OPTIONS });
  const enqueueDispatch = (resultId: string, attempt: number, delay = 0) =>
    queue.add(JOBS.taskDispatch, { resultId }, { jobId: taskDispatchJobId(resultId, attempt), delay, ...JOB_OPTIONS });
  // Not the deterministic id: the lost job may still hold it (active in a crashed worker until BullMQ's
  // stall check), and BullMQ would drop the re-drive as a duplicate. The claim makes extra jobs harmless.
  const redriveDispatch = (resultId: string, attempt: number) =>
    queue.add(
      JOBS.taskDispatch,
      { resultId },
      { jobId: `${taskDispatchJobId(resultId, attempt)}.redrive-${Date.now()}${randomAlphanumeric(6)}`, ...JOB_OPTIONS },
    );

  const processors: Record<JobName, (job: Job<JobData>) => Promise<unknown>> = {
    [JOBS.runCreated]: (job) => (job.data.stageId ? processStartedAtCreation(job, job.data.stageId) : processAdvance(job)),
    [JOBS.runAdvance]: (job) => processAdvance(job),
    async [JOBS.taskDispatch](job) {
      const resultId = job.data.resultId ?? '';
      const outcome = await dispatchResult(deps.orm.em.fork(), dispatchDeps, resultId);
      deps.logger.debug({ jobId: job.id, taskResultId: resultId, outcome: outcome.kind }, 'task dispatch');
      await followUp(resultId, outcome);
      return outcome.kind;
    },
    async [JOBS.taskDeadline](job) {
      // Woken at the progress deadline; a deadline extended by progress callbacks makes this a no-op
      // (the sweeper catches the later one). One stage or one result in jobs of earlier versions.
      const stageIds = job.data.stageIds ?? (job.data.stageId ? [job.data.stageId] : undefined);
      const runIds = await expireResults(deps.orm.em.fork(), stageIds ? { stageIds } : { resultId: job.data.resultId ?? '' });
      await Promise.all(runIds.map(enqueueAdvance));
      return runIds.length;
    },
    async [JOBS.sweep](job) {
      try {
        const {
          runIds,
          resultIds,
          idleCursor: next,
        } = await sweep(deps.orm.em.fork(), graceSeconds, {
          idleCursor,
          maxAttempts: deps.config.taskRetryDelaysMs.length + 1,
          localExecutionTimeoutSeconds: deps.config.localExecutionTimeoutSeconds,
        });
        idleCursor = next;
        await Promise.all([...runIds.map(enqueueAdvance), ...resultIds.map(({ id, attempt }) => redriveDispatch(id, attempt))]);
        return { runs: runIds.length, results: resultIds.length };
      } catch (error) {
        // The next sweep comes within its interval and does this one's work: a pass the outage prevented
        // is skipped, neither retried (sweeps would pile up for as long as it lasts) nor failed.
        if (!isBackingServiceUnavailable(error)) throw error;
        deps.logger.debug({ err: error, jobId: job.id }, 'sweep skipped: a backing service is unavailable');
        return { skipped: 'a backing service is unavailable' };
      }
    },
  };

  /** What a delivery attempt leaves to do: a retry later, or the run's next step once its result ended. */
  async function followUp(resultId: string, outcome: DispatchOutcome): Promise<void> {
    if (outcome.kind === 'retry') await enqueueDispatch(resultId, outcome.attempt, outcome.delayMs);
    if (outcome.kind === 'final') await enqueueAdvance(outcome.runId);
  }

  async function processAdvance(job: Job<JobData>): Promise<number> {
    const runId = job.data.runId ?? '';
    const em = deps.orm.em.fork();
    const started = await advanceRun(em, advanceDb.pool, runId, executor, settings);
    deps.logger.debug({ jobId: job.id, jobName: job.name, runId, dispatching: started.length }, 'run advanced');
    return deliverStarted(job, em, started);
  }

  /** A run the API created in its first stage: that stage's results are claimed and delivered (no advance to make). */
  async function processStartedAtCreation(job: Job<JobData>, stageId: string): Promise<number> {
    const em = deps.orm.em.fork();
    const claimed = await claimStartedAtCreation(em, stageId);
    deps.logger.debug({ jobId: job.id, jobName: job.name, runId: job.data.runId, dispatching: claimed.length }, 'created stage claimed');
    return deliverStarted(
      job,
      em,
      claimed.map((row) => ({ stageId, row, issued: undefined })),
    );
  }

  async function deliverStarted(job: Job<JobData>, em: EntityManager, started: readonly StartedResult[]): Promise<number> {
    if (started.length === 0) return 0;
    // After commit, the started results' first attempts, claimed by the advance, are delivered here (no
    // job in between); a crash before they end leaves leases the sweeper re-drives when they expire.
    // Meanwhile the started stages' deadline is scheduled (their results share it; one extended by
    // progress is the sweeper's).
    const scheduled = Promise.all([...new Set(started.map((result) => result.stageId))].map((stageId) => stageDeadlines.write(stageId)));
    // Awaited after the deliveries; a rejection meanwhile must not count as unhandled.
    scheduled.catch(() => undefined);
    const delivered = await Promise.allSettled(
      started.map(async ({ row, issued }) => {
        const outcome = await deliverClaimed(em, dispatchDeps, row, tokenOf(deps.secrets, row, issued));
        deps.logger.debug({ jobId: job.id, taskResultId: row.id, outcome: outcome.kind }, 'task dispatch');
        await followUp(row.id, outcome);
      }),
    );
    await scheduled;
    const failed = delivered.find((settled) => settled.status === 'rejected');
    if (failed) throw failed.reason;
    return started.length;
  }

  const worker = new Worker<JobData>(
    QUEUES.runs,
    async (job) => {
      const processor = processors[job.name as JobName];
      // Refuse unknown jobs loudly rather than completing them silently.
      if (!processor) throw new UnrecoverableError(`no processor for job ${job.name}`);
      const stopTimer = metrics.jobDuration.startTimer({ name: job.name });
      try {
        const result = await processor(job);
        stopTimer({ outcome: 'completed' });
        return result;
      } catch (error) {
        stopTimer({ outcome: 'failed' });
        throw error;
      }
    },
    {
      connection: workerClient,
      prefix,
      concurrency: deps.config.workerConcurrency,
      settings: {
        backoffStrategy: (failures, _type, error, job) => jobBackoff(failures, error, job ?? { timestamp: 0, opts: {} }, Date.now()),
      },
    },
  );
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
