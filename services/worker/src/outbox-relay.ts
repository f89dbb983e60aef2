import type { MikroORM } from '@mikro-orm/postgresql';
import { ChannelListener, inTransaction, nativePool, prepared, runPrepared } from '@runtasks/shared/db';
import { JOB_OPTIONS, OUTBOX_CHANNEL, outboxJobId, queueOfJob, QUEUES, type RedisAvailability } from '@runtasks/shared/queue';
import { type Logger } from '@runtasks/shared/logger';
import type { Queue } from 'bullmq';
import type { Pool } from 'pg';

interface OutboxRow {
  id: string;
  topic: string;
  aggregate_id: string;
  payload: Record<string, string>;
}

const BATCH_SIZE = 100;
const PUBLISH_TIMEOUT_MS = 10_000;
/** Published rows older than seven days are deleted about this often, by each relay. */
const PRUNE_INTERVAL_MS = 60_000;
/** Rows a prune statement looks at (and deletes at most), and statements a prune makes at most. */
const PRUNE_BATCH = 5_000;
const PRUNE_BATCHES = 20;

export interface OutboxRelayOptions {
  orm: MikroORM;
  queue: Queue;
  /** Where notification events go (queueOfJob): their own queue, so they never take the run engine's slots; default `queue`. */
  notificationQueue?: Queue;
  databaseUrl: string;
  pollIntervalMs: number;
  logger: Logger;
  /** How long Redis may take to accept a batch before the claim is rolled back and retried later. */
  publishTimeoutMs?: number;
  /** Where a publication that failed because Redis is away is told (the outage's two warnings), rather than warned of each time. */
  redisAvailability?: RedisAvailability;
}

/**
 * Claims up to $1 unpublished events, oldest first, and marks them published in the same statement
 * (one round trip): the mark commits only once Redis has accepted them, and a publication that fails
 * rolls it back with the claim. SKIP LOCKED lets relays claim disjoint batches. Returned oldest first,
 * the order their jobs are added in (an UPDATE's RETURNING has none of its own).
 */
export const CLAIM_EVENTS = prepared(
  'outbox-claim-mark',
  `with claimed as (
     update outbox_events o set published_at = now(), publish_attempts = o.publish_attempts + 1
       from (select id from outbox_events where published_at is null order by id limit $1 for update skip locked) oldest
      where o.id = oldest.id
      returning o.id, o.topic, o.aggregate_id, o.payload)
   select * from claimed order by id`,
);

/**
 * Deletes the events published more than seven days ago among the $1 oldest (the head of the primary
 * key: ids grow with time), so a prune reads a bounded number of rows by index however large the table
 * is, and never an event not yet published.
 */
export const PRUNE_EVENTS_SQL = `delete from outbox_events o
    using (select id, published_at from outbox_events order by id limit $1) head
    where o.id = head.id and head.published_at < now() - interval '7 days'`;

/**
 * Prunes from the oldest event on, `batch` rows at a time, until a batch deletes nothing or after
 * `batches` of them (each its own statement and commit). Returns how many it deleted.
 */
export async function pruneOutbox(pool: Pool, batch = PRUNE_BATCH, batches = PRUNE_BATCHES): Promise<number> {
  let total = 0;
  for (let index = 0; index < batches; index += 1) {
    const deleted = (await pool.query(PRUNE_EVENTS_SQL, [batch])).rowCount ?? 0;
    total += deleted;
    if (deleted === 0) break;
  }
  return total;
}

/**
 * Publishes outbox events to BullMQ. Rows are claimed with SKIP LOCKED, so any number of relays can
 * run; an event's mark as published commits only after Redis accepted it, and a deterministic job id
 * makes a second publication (after a crash between the two) a no-op.
 */
export class OutboxRelay {
  private readonly options: OutboxRelayOptions;
  private readonly listener: ChannelListener;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private prunedAt = 0;
  private pruning: Promise<void> | undefined;
  private stopped = false;
  private readonly stopping = new AbortController();

  constructor(options: OutboxRelayOptions) {
    this.options = options;
    // LISTEN is a latency optimisation only: polling alone loses nothing. A lost listener is made
    // again, or every event would wait for the poll; whatever was committed while no one listened
    // is published as soon as it listens again.
    this.listener = new ChannelListener({
      databaseUrl: options.databaseUrl,
      channel: OUTBOX_CHANNEL,
      logger: options.logger,
      name: 'outbox listener',
      fallback: 'polling continues',
      onNotification: () => this.wake(),
      onListening: () => this.wake(),
    });
  }

  async start(): Promise<void> {
    await this.listener.start();
    this.timer = setInterval(() => this.wake(), this.options.pollIntervalMs);
    this.wake();
  }

  /** Publishes everything pending now; resolves when the outbox was empty at least once. */
  async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      const published = await this.publishBatch();
      total += published;
      if (published < BATCH_SIZE) return total;
    }
  }

  /**
   * Prunes, when it is time, beside the publication rather than in its way: on its own connection and
   * its own statements, never awaited by a drain (it deletes only published events, which no claim
   * locks), so a long prune delays no event.
   */
  private pruneWhenDue(): void {
    if (this.pruning || this.stopped || Date.now() - this.prunedAt < PRUNE_INTERVAL_MS) return;
    this.prunedAt = Date.now();
    this.pruning = nativePool(this.options.orm.em)
      .then((pool) => pruneOutbox(pool))
      .then(() => undefined)
      .catch((error: unknown) => this.options.logger.warn({ err: error }, 'outbox relay could not prune published events; will retry'))
      .finally(() => {
        this.pruning = undefined;
      });
  }

  wake(): void {
    if (this.stopped) return;
    this.pruneWhenDue();
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drain()
      .then(() => undefined)
      .catch((error: unknown) => {
        const message = 'outbox relay could not publish; will retry';
        if (this.options.redisAvailability) this.options.redisAvailability.report(error, message);
        else this.options.logger.warn({ err: error }, message);
      })
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    // An unacknowledged publication is rolled back, not awaited: with Redis down it would never end.
    this.stopping.abort();
    if (this.timer) clearInterval(this.timer);
    // Not listened to any more: a connection lost while the last publication finishes is not made again.
    const listenerStopped = this.listener.stop();
    await this.running;
    await this.pruning;
    await listenerStopped;
  }

  private async publishBatch(): Promise<number> {
    // On a client of the pool, in a transaction: the claim (and its mark) holds the rows until Redis has
    // accepted their jobs and it commits, or is rolled back. Prepared: this runs for every run and stage.
    return inTransaction(await nativePool(this.options.orm.em), async (client) => {
      const rows = await runPrepared<OutboxRow>(client, CLAIM_EVENTS, [BATCH_SIZE]);
      if (rows.length === 0) return 0;
      await this.addJobs(rows);
      return rows.length;
    });
  }

  /**
   * BullMQ waits for Redis indefinitely, which would hold the claim's row locks (and a database
   * connection) for as long as Redis is down. Give up after a deadline or on stop: the transaction
   * rolls back, the rows stay unpublished, and a late acceptance is harmless (deterministic job id).
   */
  private async addJobs(rows: readonly OutboxRow[]): Promise<void> {
    const timeoutMs = this.options.publishTimeoutMs ?? PUBLISH_TIMEOUT_MS;
    const signal = this.stopping.signal;
    const job = (row: OutboxRow) => ({
      name: row.topic,
      data: row.payload,
      opts: { jobId: outboxJobId(row.topic, row.aggregate_id, row.id), ...JOB_OPTIONS },
    });
    const notifications = this.options.notificationQueue;
    const separate = notifications ? rows.filter((row) => queueOfJob(row.topic) === QUEUES.notifications) : [];
    const rest = separate.length > 0 ? rows.filter((row) => queueOfJob(row.topic) !== QUEUES.notifications) : rows;
    const added = Promise.all([
      ...(rest.length > 0 ? [this.options.queue.addBulk(rest.map(job))] : []),
      ...(notifications && separate.length > 0 ? [notifications.addBulk(separate.map(job))] : []),
    ]);
    added.catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const givenUp = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`Redis did not accept the outbox events within ${timeoutMs} ms`)), timeoutMs);
      onAbort = () => reject(new Error('outbox relay stopped before Redis accepted the events'));
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      await Promise.race([added, givenUp]);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal.removeEventListener('abort', onAbort);
    }
  }
}
