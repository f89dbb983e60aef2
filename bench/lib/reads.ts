import { randomBytes } from 'node:crypto';
import { log, type Options } from './env.ts';
import { burstSample } from './pipeline.ts';
import { bulkTasks, createOrg, seedPipelineOrg, type Org } from './seed.ts';
import { Stack } from './stack.ts';
import { range, round, type Range } from './stats.ts';

/**
 * H3 (API reads) and H4's list growth: closed loops of 50 clients GETting one endpoint, random
 * resources out of a seeded set. The API process serves them; worker and task server sit idle.
 */

export const READ_CONCURRENCY = 50;

/** H3's target reads are measured with one API process, then with this many sharing the port. */
export const SHARED_PORT_APIS = 2;
export const SHARED_PORT_SUFFIX = `-${SHARED_PORT_APIS}api`;

export interface ReadSample {
  requests: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  cpuMsPerRequest: number;
  apiCpuMsPerRequest: number;
  postgresCpuMsPerRequest: number;
  foreignPercent: number;
  meanBytes: number;
  non200: number;
}

export interface ReadResult {
  key: string;
  label: string;
  /** What `meta.pagination.total-count` said (lists), checked once before measuring. */
  totalCount: number | null;
  samples: ReadSample[];
  perSecond: Range;
  p99Ms: Range;
  p50Ms: Range;
  cpuMsPerRequest: Range;
}

interface GetResult {
  count: number;
  errors: number;
  errorSamples: string[];
  statuses: Record<string, number>;
  elapsedMs: number;
  meanBytes: number;
  p50: number;
  p99: number;
}

async function measureReads(
  stack: Stack,
  token: string,
  key: string,
  label: string,
  paths: string[],
  options: Options,
): Promise<ReadResult> {
  const check = await stack.call('GET', (paths[0] as string).replace('/api/v2', ''), token);
  if (check.status !== 200) throw new Error(`${label}: ${check.status} ${JSON.stringify(check.body).slice(0, 300)}`);
  const pagination = (check.body['meta'] as { pagination?: { 'total-count': number } } | undefined)?.pagination;
  const run = async (seconds: number): Promise<ReadSample> => {
    const meter = stack.meter();
    meter.start();
    const result = await stack.loadgen.call<GetResult>(
      { cmd: 'get', baseUrl: stack.baseUrl, token, paths, concurrency: READ_CONCURRENCY, seconds },
      (seconds + 30) * 1000,
    );
    const cpu = meter.stop();
    const non200 =
      result.errors + Object.entries(result.statuses).reduce((sum, [status, count]) => sum + (status === '200' ? 0 : count), 0);
    if (non200 > 0) log(`  ${label}: ${non200} failed requests: ${result.errorSamples.join(' | ')}`);
    return {
      requests: result.count,
      perSecond: (result.count / result.elapsedMs) * 1000,
      p50Ms: result.p50,
      p99Ms: result.p99,
      cpuMsPerRequest: cpu.totalMs / result.count,
      apiCpuMsPerRequest: cpu.ms.api / result.count,
      postgresCpuMsPerRequest: (cpu.ms.postgres + cpu.ms['postgres-bg']) / result.count,
      foreignPercent: cpu.foreignPercent,
      meanBytes: result.meanBytes,
      non200,
    };
  };
  await run(options.quick ? 1 : 4);
  const samples: ReadSample[] = [];
  for (let index = 0; index < 3; index += 1) {
    let sample = await run(options.quick ? 1 : 6);
    if (!options.quick && sample.foreignPercent > 10) {
      const again = await run(6);
      if (again.foreignPercent < sample.foreignPercent) sample = again;
    }
    samples.push(sample);
  }
  const result: ReadResult = {
    key,
    label,
    totalCount: pagination ? pagination['total-count'] : null,
    samples,
    perSecond: range(samples.map((sample) => sample.perSecond)),
    p99Ms: range(samples.map((sample) => sample.p99Ms)),
    p50Ms: range(samples.map((sample) => sample.p50Ms)),
    cpuMsPerRequest: range(samples.map((sample) => sample.cpuMsPerRequest)),
  };
  const middle = samples[1] as ReadSample;
  log(
    `  ${label}: ${round(result.perSecond.median, 0)} req/s [${round(result.perSecond.min, 0)}–${round(result.perSecond.max, 0)}], ` +
      `p50 ${round(result.p50Ms.median, 1)} / p99 ${round(result.p99Ms.median, 1)} ms, ${round(result.cpuMsPerRequest.median, 3)} CPU-ms/req ` +
      `(API ${round(middle.apiCpuMsPerRequest, 3)}, PG ${round(middle.postgresCpuMsPerRequest, 3)}), ${round(middle.meanBytes / 1024, 1)} KiB` +
      `${result.totalCount !== null ? `, total-count ${result.totalCount}` : ''}, foreign ${round(middle.foreignPercent, 0)} %`,
  );
  return result;
}

const taskPages = (org: Org, size: number): string[] =>
  [1, 2, 3, 4, 5].map((page) => `/api/v2/organizations/${org.name}/tasks?page%5Bsize%5D=${size}&page%5Bnumber%5D=${page}`);

export interface ReadsOutput {
  h3: ReadResult[];
  /** H3's target reads served by the lean reference (bench/lean/reads.ts) from the same rows. */
  lean: ReadResult[];
  growth: { small: ReadResult; large: ReadResult; smallInLargeTable: ReadResult; rows: { small: number; large: number } } | undefined;
}

/**
 * H3's target reads served by the lean reference, from the rows the project's were just measured on
 * (before H4 adds its 100,000 tasks). The project's stack stays up, idle, meanwhile.
 */
async function leanReads(
  reads: readonly { token: string; key: string; label: string; paths: string[] }[],
  options: Options,
): Promise<ReadResult[]> {
  log('reads: starting the lean reference API, load generator');
  const lean = await Stack.start({ workers: 0, apiOnly: true, lean: { tasks: 3 }, profile: options.profile });
  try {
    const results: ReadResult[] = [];
    for (const read of reads)
      results.push(await measureReads(lean, read.token, read.key, `${read.label} (lean reference)`, read.paths, options));
    return results;
  } finally {
    await lean.stop();
  }
}

/** H3 and/or H4's list growth, on one stack (the 1,000-task organization is H3's task list and the growth's "1,000"). */
export async function runReads(
  options: Options,
  parts: { h3: boolean; growth: boolean; /** The lean reference's reads after H3's (default true). */ lean?: boolean },
): Promise<ReadsOutput> {
  log('reads: starting API, 1 worker, task server, load generator');
  const stack = await Stack.start({ workers: 1, profile: options.profile });
  // H3's three target reads again with two API processes sharing the port, once this stack has stopped.
  const again: { token: string; key: string; label: string; paths: string[] }[] = [];
  let output: ReadsOutput;
  try {
    const suffix = randomBytes(3).toString('hex');
    const small = 1000;
    const large = options.quick ? 10_000 : 100_000;
    const org = await seedPipelineOrg(stack, `b-reads-${suffix}`, 3, 1);
    await bulkTasks(stack, org.id, small - org.taskIds.length, 'seeded');
    output = { h3: [], lean: [], growth: undefined };
    const tasks20 = await measureReads(
      stack,
      org.token,
      'tasks-20',
      `GET /organizations/:org/tasks page[size]=20 (${small} tasks)`,
      taskPages(org, 20),
      options,
    );
    if (parts.h3) {
      output.h3.push(tasks20);
      again.push({ token: org.token, key: 'tasks-20', label: tasks20.label, paths: taskPages(org, 20) });
      output.h3.push(
        await measureReads(
          stack,
          org.token,
          'tasks-100',
          `GET /organizations/:org/tasks page[size]=100 (${small} tasks)`,
          taskPages(org, 100),
          options,
        ),
      );
      // 100 completed runs (2 stages × 3 results each) to read back.
      await burstSample(stack, org, 100);
      const runs = (await stack.db.query<{ id: string }>('select id from runs order by id')).rows.map((row) => row.id);
      const results = (await stack.db.query<{ id: string }>('select id from task_results order by id')).rows.map((row) => row.id);
      for (const size of [20, 100]) {
        const label = `GET /runs/:id/task-stages page[size]=${size}`;
        const paths = runs.map((id) => `/api/v2/runs/${id}/task-stages?page%5Bsize%5D=${size}`);
        output.h3.push(await measureReads(stack, org.token, `stages-${size}`, label, paths, options));
        if (size === 20) again.push({ token: org.token, key: 'stages-20', label, paths });
      }
      const resultPaths = results.map((id) => `/api/v2/task-results/${id}`);
      output.h3.push(await measureReads(stack, org.token, 'result', 'GET /task-results/:id', resultPaths, options));
      again.push({ token: org.token, key: 'result', label: 'GET /task-results/:id', paths: resultPaths });
      if (parts.lean ?? true) output.lean = await leanReads(again, options);
    }
    if (parts.growth) {
      const big = await createOrg(stack, `b-big-${suffix}`);
      log(`  seeding ${large.toLocaleString('en-US')} run tasks in one organization`);
      await bulkTasks(stack, big.id, large, 'seeded');
      const largeResult = await measureReads(
        stack,
        big.token,
        'tasks-20-large',
        `GET /organizations/:org/tasks page[size]=20 (${large} tasks)`,
        taskPages(big, 20),
        options,
      );
      const smallInLarge = await measureReads(
        stack,
        org.token,
        'tasks-20-small-in-large',
        `GET /organizations/:org/tasks page[size]=20 (${small} tasks; table holds ${large + small})`,
        taskPages(org, 20),
        options,
      );
      output.growth = { small: tasks20, large: largeResult, smallInLargeTable: smallInLarge, rows: { small, large } };
    }
  } finally {
    await stack.stop();
  }
  if (again.length > 0) {
    log(`reads: starting ${SHARED_PORT_APIS} API processes on one port (REUSE_PORT), load generator`);
    const shared = await Stack.start({ workers: 0, apiOnly: true, apis: SHARED_PORT_APIS, profile: options.profile });
    try {
      for (const read of again) {
        const label = `${read.label} (${SHARED_PORT_APIS} API processes)`;
        output.h3.push(await measureReads(shared, read.token, `${read.key}${SHARED_PORT_SUFFIX}`, label, read.paths, options));
      }
    } finally {
      await shared.stop();
    }
  }
  return output;
}
