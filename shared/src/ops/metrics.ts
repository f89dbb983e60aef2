import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** A queue whose depth is reported at scrape time (BullMQ's Queue fits). */
export interface CountableQueue {
  name: string;
  getJobCounts(...states: string[]): Promise<Record<string, number>>;
}

const QUEUE_STATES = ['waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized', 'waiting-children'];

/** One registry per process, with the service's own metrics beside Node's defaults. */
export class Metrics {
  readonly registry = new Registry();
  readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  readonly jobDuration: Histogram<'name' | 'outcome'>;
  readonly taskRequestDuration: Histogram<'outcome'>;
  private readonly queues: CountableQueue[] = [];

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
  }

  watchQueue(queue: CountableQueue): void {
    if (!this.queues.includes(queue)) this.queues.push(queue);
  }
}
