import type { CpuReport } from './cpu.ts';
import { log, type Options } from './env.ts';
import { Stack } from './stack.ts';
import { range, round, type Range } from './stats.ts';

/**
 * The component baseline, measured in the same run as the figures: a one-row insert transaction,
 * a BullMQ no-op job (add + process) and an undici request pair to the task server. Each gives a
 * rate, CPU-ms per operation (client + the server it exercises, from /proc) and low-load latency.
 */

export interface Component {
  perSecond: Range;
  cpuMsPerOp: Range;
  /** Low-load latency: one operation at a time. */
  p50Ms: Range;
  p99Ms: Range;
}

export interface BaselineResult {
  insert: Component;
  job: Component;
  http: Component;
  foreignPercent: number[];
}

interface Throughput {
  ops: number;
  elapsedMs: number;
  perSecond: number;
}
interface Latency {
  p50: number;
  p99: number;
}

export async function runBaseline(options: Options): Promise<BaselineResult> {
  log('baseline: starting the task server and the component client');
  const stack = await Stack.start({ workers: 0, componentsOnly: true });
  const foreign: number[] = [];
  const client = stack.loadgen;
  try {
    await stack.db.query(
      `create table if not exists bench_component (id bigserial primary key, run_id text not null, status text not null, message text,
         url text, attempts int not null, payload jsonb not null, created_at timestamptz not null default now(), updated_at timestamptz not null default now())`,
    );
    await stack.db.query('create index if not exists bench_component_run_idx on bench_component (run_id)');
    const measure = async <T extends Throughput>(
      work: () => Promise<T>,
      cost: (cpu: CpuReport) => number,
    ): Promise<{ result: T; cpuMsPerOp: number }> => {
      const meter = stack.meter();
      meter.start();
      const result = await work();
      const cpu = meter.stop();
      foreign.push(cpu.foreignPercent);
      return { result, cpuMsPerOp: cost(cpu) / result.ops };
    };
    const seconds = options.quick ? 1 : 3;
    const samples = 3;

    // Warm-up of each component, then three samples.
    await client.call({ cmd: 'pgInsert', seconds: 1, concurrency: 8 });
    const inserts = [];
    const insertLatency: Latency[] = [];
    for (let index = 0; index < samples; index += 1) {
      inserts.push(
        await measure(
          () => client.call<Throughput>({ cmd: 'pgInsert', seconds, concurrency: 8 }),
          (cpu) => cpu.ms.loadgen + cpu.ms.postgres + cpu.ms['postgres-bg'],
        ),
      );
      insertLatency.push(await client.call<Latency>({ cmd: 'pgInsert', seconds: options.quick ? 0.5 : 2, concurrency: 1 }));
    }
    const insert: Component = {
      perSecond: range(inserts.map((sample) => sample.result.perSecond)),
      cpuMsPerOp: range(inserts.map((sample) => sample.cpuMsPerOp)),
      p50Ms: range(insertLatency.map((sample) => sample.p50)),
      p99Ms: range(insertLatency.map((sample) => sample.p99)),
    };
    log(
      `  one-row insert: ${round(insert.perSecond.median, 0)}/s at 8 clients, ${round(insert.cpuMsPerOp.median, 3)} CPU-ms each, c1 p50 ${round(insert.p50Ms.median, 2)} / p99 ${round(insert.p99Ms.median, 2)} ms`,
    );

    const jobsPerSample = options.quick ? 1000 : 10_000;
    await client.call({ cmd: 'bullThroughput', jobs: 500 });
    const jobs = [];
    const jobLatency: Latency[] = [];
    for (let index = 0; index < samples; index += 1) {
      jobs.push(
        await measure(
          () => client.call<Throughput>({ cmd: 'bullThroughput', jobs: jobsPerSample }),
          (cpu) => cpu.ms.loadgen + cpu.ms.redis,
        ),
      );
      jobLatency.push(await client.call<Latency>({ cmd: 'bullLatency', jobs: options.quick ? 100 : 300 }));
    }
    const job: Component = {
      perSecond: range(jobs.map((sample) => sample.result.perSecond)),
      cpuMsPerOp: range(jobs.map((sample) => sample.cpuMsPerOp)),
      p50Ms: range(jobLatency.map((sample) => sample.p50)),
      p99Ms: range(jobLatency.map((sample) => sample.p99)),
    };
    log(
      `  BullMQ no-op job: ${round(job.perSecond.median, 0)}/s, ${round(job.cpuMsPerOp.median, 3)} CPU-ms each, add→start p50 ${round(job.p50Ms.median, 2)} / p99 ${round(job.p99Ms.median, 2)} ms`,
    );

    const url = stack.taskServerUrl;
    await client.call({ cmd: 'httpPairs', url, seconds: 1, inflight: 64 });
    const pairs = [];
    const pairLatency: Latency[] = [];
    for (let index = 0; index < samples; index += 1) {
      pairs.push(
        await measure(
          () => client.call<Throughput>({ cmd: 'httpPairs', url, seconds, inflight: 64 }),
          (cpu) => cpu.ms.loadgen + cpu.ms['task-server'],
        ),
      );
      pairLatency.push(await client.call<Latency>({ cmd: 'httpSequential', url, requests: options.quick ? 200 : 1000 }));
    }
    const http: Component = {
      perSecond: range(pairs.map((sample) => sample.result.perSecond)),
      cpuMsPerOp: range(pairs.map((sample) => sample.cpuMsPerOp)),
      p50Ms: range(pairLatency.map((sample) => sample.p50)),
      p99Ms: range(pairLatency.map((sample) => sample.p99)),
    };
    log(
      `  undici request pair: ${round(http.perSecond.median, 0)}/s at 64 in flight, ${round(http.cpuMsPerOp.median, 3)} CPU-ms each, sequential p50 ${round(http.p50Ms.median, 2)} / p99 ${round(http.p99Ms.median, 2)} ms`,
    );
    await stack.db.query('drop table if exists bench_component');
    return { insert, job, http, foreignPercent: foreign };
  } finally {
    await stack.stop();
  }
}
