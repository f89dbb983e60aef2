import type { MikroORM } from '@mikro-orm/postgresql';
import { inTransaction, nativePool, OUTBOX_CHANNEL, outboxJobId, prepared, runPrepared, type Logger } from '@runtasks/shared';
import type { Queue } from 'bullmq';
import pg from 'pg';

interface OutboxRow {
  id: string;
  topic: string;
  aggregate_id: string;
  payload: Record<string, string>;
}

const BATCH_SIZE = 100;
const RETENTION = '7 days';
const PUBLISH_TIMEOUT_MS = 10_000;
/** Published rows older than RETENTION are deleted at most this often (the delete scans the table). */
const PRUNE_INTERVAL_MS = 60_000;
/** A lost LISTEN connection is retried after 0.5 s, doubling up to 15 s (polling covers the gap). */
const LISTEN_RETRY_BASE_MS = 500;
const LISTEN_RETRY_MAX_MS = 15_000;

export interface OutboxRelayOptions {
  orm: MikroORM;
  queue: Queue;
  databaseUrl: string;
  pollIntervalMs: number;
  logger: Logger;
  /** How long Redis may take to accept a batch before the claim is rolled back and retried later. */
  publishTimeoutMs?: number;
}

/** $1 batch size. */
const CLAIM_EVENTS = prepared(
  'outbox-claim',
  `select id, topic, aggregate_id, payload from outbox_events where published_at is null order by id limit $1 for update skip locked`,
);

/** $1 the claimed rows' ids. */
const MARK_PUBLISHED = prepared(
  'outbox-published',
  `update outbox_events set published_at = now(), publish_attempts = publish_attempts + 1 where id = any($1::bigint[])`,
);

export const JOB_RETENTION = { removeOnComplete: { age: 86_400, count: 1000 }, removeOnFail: { age: 7 * 86_400 } } as const;

/**
 * Publishes outbox events to BullMQ. Rows are claimed with SKIP LOCKED, so any number of relays can
 * run; an event is marked published only after Redis accepted it, and a deterministic job id makes a
 * second publication (after a crash between the two) a no-op.
 */
export class OutboxRelay {
  private readonly options: OutboxRelayOptions;
  private listener: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private prunedAt = 0;
  private listenTimer: NodeJS.Timeout | undefined;
  private listenFailures = 0;
  private stopped = false;
  private readonly stopping = new AbortController();

  constructor(options: OutboxRelayOptions) {
    this.options = options;
  }

  async start(): Promise<void> {
    await this.listen();
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

  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drain()
      .then(() => undefined)
      .catch((error: unknown) => this.options.logger.warn({ err: error }, 'outbox relay could not publish; will retry'))
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
    if (this.listenTimer) clearTimeout(this.listenTimer);
    await this.running;
    await this.listener?.end().catch(() => undefined);
  }

  private async listen(): Promise<void> {
    // LISTEN is a latency optimisation only: polling alone loses nothing. A lost listener (PostgreSQL
    // restarted, the connection killed) is re-established, or every event would wait for the poll.
    const client = new pg.Client({ connectionString: this.options.databaseUrl });
    let lost = false;
    const onLost = (error?: Error): void => {
      if (lost) return;
      lost = true;
      if (this.listener === client) this.listener = undefined;
      client.end().catch(() => undefined);
      if (this.stopped) return;
      this.options.logger.warn({ err: error }, 'outbox listener connection lost; polling continues');
      this.scheduleListen();
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', () => this.wake());
    try {
      await client.connect();
      await client.query(`listen ${OUTBOX_CHANNEL}`);
      if (this.stopped) {
        await client.end().catch(() => undefined);
        return;
      }
      this.listener = client;
      this.listenFailures = 0;
      // Whatever was committed while no one listened is published now, not at the next poll.
      this.wake();
    } catch (error) {
      if (!lost) {
        lost = true;
        await client.end().catch(() => undefined);
        if (this.stopped) return;
        this.options.logger.warn({ err: error }, 'outbox listener unavailable; polling continues and it retries');
        this.scheduleListen();
      }
    }
  }

  private scheduleListen(): void {
    if (this.stopped || this.listenTimer) return;
    this.listenFailures += 1;
    const delayMs = Math.min(LISTEN_RETRY_MAX_MS, LISTEN_RETRY_BASE_MS * 2 ** Math.min(this.listenFailures - 1, 6));
    this.listenTimer = setTimeout(() => {
      this.listenTimer = undefined;
      void this.listen();
    }, delayMs);
  }

  private async publishBatch(): Promise<number> {
    // On a client of the pool, in a transaction: the claim's row locks hold until the rows are marked
    // published (or the claim is rolled back). Prepared: this runs for every run and stage.
    return inTransaction(await nativePool(this.options.orm.em), async (client) => {
      const rows = await runPrepared<OutboxRow>(client, CLAIM_EVENTS, [BATCH_SIZE]);
      if (rows.length === 0) return 0;
      await this.addJobs(rows);
      await runPrepared(client, MARK_PUBLISHED, [rows.map((row) => row.id)]);
      if (Date.now() - this.prunedAt >= PRUNE_INTERVAL_MS) {
        this.prunedAt = Date.now();
        await client.query(`delete from outbox_events where published_at < now() - interval '${RETENTION}'`);
      }
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
    const added = this.options.queue.addBulk(
      rows.map((row) => ({
        name: row.topic,
        data: row.payload,
        opts: { jobId: outboxJobId(row.topic, row.aggregate_id, row.id), ...JOB_RETENTION },
      })),
    );
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
