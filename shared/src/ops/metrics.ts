import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** A queue whose depth is reported at scrape time (BullMQ's Queue fits). */
export interface CountableQueue {
  name: string;
  getJobCounts(...states: string[]): Promise<Record<string, number>>;
}

const QUEUE_STATES = ['waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized', 'waiting-children'];

/** What the stored objects take per kind (configuration-archive, plan-json), read at scrape time. */
export type StorageUsage = () => Promise<readonly { kind: string; bytes: number; objects: number }[]>;

/** One registry per process, with the service's own metrics beside Node's defaults. */
export class Metrics {
  readonly registry = new Registry();
  readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  readonly jobDuration: Histogram<'name' | 'outcome'>;
  readonly taskRequestDuration: Histogram<'outcome'>;
  private readonly queues: CountableQueue[] = [];
  private storageUsage: StorageUsage | undefined;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.httpDuration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'API request duration by route template and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [this.registry],
    });
    this.jobDuration = new Histogram({
      name: 'job_duration_seconds',
      help: 'Worker job duration by job name and outcome',
      labelNames: ['name', 'outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [this.registry],
    });
    this.taskRequestDuration = new Histogram({
      name: 'task_request_duration_seconds',
      help: 'Outbound run task requests by outcome (acknowledged, http_<status>, or an error kind)',
      labelNames: ['outcome'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    const queues = this.queues;
    new Gauge({
      name: 'queue_jobs',
      help: 'Jobs per queue and state, read from Redis at scrape time',
      labelNames: ['queue', 'state'],
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const queue of queues) {
          try {
            const counts = await queue.getJobCounts(...QUEUE_STATES);
            for (const [state, count] of Object.entries(counts)) this.set({ queue: queue.name, state }, count);
          } catch {
            // Redis unavailable: readiness reports it; the metric is simply absent this scrape.
          }
        }
      },
    });
    // One query a scrape for both gauges: a reading is shared for a second.
    let reading: { at: number; usage: ReturnType<StorageUsage> } | undefined;
    const readUsage = (): ReturnType<StorageUsage> => {
      if (!reading || Date.now() - reading.at > 1000) {
        // PostgreSQL unavailable: readiness reports it; the gauges are simply absent this scrape.
        reading = { at: Date.now(), usage: (this.storageUsage?.() ?? Promise.resolve([])).catch(() => []) };
      }
      return reading.usage;
    };
    new Gauge({
      name: 'storage_bytes',
      help: 'Bytes of configuration archives and plan JSON stored, by kind (whichever STORAGE_BACKEND holds them), read from PostgreSQL at scrape time',
      labelNames: ['kind'],
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const usage of await readUsage()) this.set({ kind: usage.kind }, usage.bytes);
      },
    });
    new Gauge({
      name: 'storage_objects',
      help: 'Configuration archives and plan JSON stored, by kind',
      labelNames: ['kind'],
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const usage of await readUsage()) this.set({ kind: usage.kind }, usage.objects);
      },
    });
  }

  /** Where storage_bytes and storage_objects are read from: the first one given (with `npm start` the API's and the worker's are the same). */
  watchStorage(usage: StorageUsage): void {
    this.storageUsage ??= usage;
  }

  watchQueue(queue: CountableQueue): void {
    if (!this.queues.includes(queue)) this.queues.push(queue);
  }
}
