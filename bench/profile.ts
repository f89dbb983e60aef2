/**
 * `npm run bench:profile`: where the time of a run goes. Runs the H1 pipeline (2 stages × 3 tasks,
 * one worker) with the API, worker and task server under --cpu-prof and with every SQL statement
 * counted, then writes bench/results/profile-pipeline-latest.md: statements per run by shape and process,
 * and self time by package and function, and PostgreSQL's side: CPU by client and, when the server has
 * pg_stat_statements loaded, time, planning and WAL by statement shape, and, where pg_walinspect can read
 * the WAL back (PostgreSQL 15 and later), the WAL by table and record kind. Not part of `npm run bench`
 * (profiling slows the processes).
 * `-- --rate=N`: an open loop at N runs/s instead of the burst (profile-open-latest.md);
 * `-- --reads=tasks|stages|result [--concurrency=N]`: one read endpoint under load.
 */
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { summarise, type ProfileSummary } from './lib/cpuprofile.ts';
import { log, parseOptions, RESULTS_DIR, sleep, TMP_DIR } from './lib/env.ts';
import { describeLatency, openSample } from './lib/latency.ts';
import { burstSample, describeSample } from './lib/pipeline.ts';
import { bulkTasks, seedPipelineOrg } from './lib/seed.ts';
import { freshDatabase, Stack } from './lib/stack.ts';
import {
  backendCpuTable,
  backendTicks,
  type BackendTicks,
  readStatementStats,
  resetStatementStats,
  statementStatsAvailable,
  statementTable,
} from './lib/pg-statements.ts';
import { round } from './lib/stats.ts';
import { currentLsn, readWalRecords, walRecordsAvailable, walTables } from './lib/wal-records.ts';

const options = parseOptions();
const reads = process.argv.find((arg) => arg.startsWith('--reads='))?.slice(8);
const tasks = Number(process.argv.find((arg) => arg.startsWith('--tasks='))?.slice(8) ?? 3);
// Fewer clients than cores keep the samples honest: on saturated cores a preempted process is sampled
// wherever it was preempted (often inside a socket write), which reads as time spent there.
const concurrency = Number(process.argv.find((arg) => arg.startsWith('--concurrency='))?.slice(14) ?? 50);
// The pipeline as an open loop at this many runs/s instead of a saturating burst: for the same reason,
// a profile of unsaturated processes shows where CPU goes rather than where processes were preempted.
const rateArg = process.argv.find((arg) => arg.startsWith('--rate='))?.slice(7);
const rate = rateArg === undefined ? undefined : Number(rateArg);
if (rate !== undefined && !(rate > 0 && rate <= 200)) {
  process.stderr.write('--rate must be a number of runs per second, above 0 and at most 200\n');
  process.exit(2);
}
const PROF_DIR = `${TMP_DIR}/prof`;

async function dumpCounts(stack: Stack): Promise<void> {
  for (const managed of stack.processes) if (managed.role === 'api' || managed.role === 'worker') managed.child.kill('SIGUSR2');
  await sleep(500);
}

/** Named prepared statements by how PostgreSQL planned their executions (see count-queries.ts). */
function planTable(name: string): string[] {
  const file = `${PROF_DIR}/${name}.queries.json.plans.json`;
  if (!existsSync(file)) return [];
  const plans = Object.entries(JSON.parse(readFileSync(file, 'utf8')) as Record<string, { generic: number; custom: number }>).sort(
    (a, b) => b[1].custom - a[1].custom,
  );
  return [
    `## Plans of prepared statements: ${name} (whole process life, summed over connections)`,
    '',
    'PostgreSQL plans a prepared statement for its values five times per connection, then keeps the generic plan unless it looks dearer; a statement still planned for its values after that is planned at every execution.',
    '',
    '| statement | generic plans | custom plans |',
    '|---|---:|---:|',
    ...plans.map(([statement, counts]) => `| \`${statement}\` | ${counts.generic} | ${counts.custom} |`),
    '',
  ];
}

function readCounts(name: string): Record<string, number> {
  const file = `${PROF_DIR}/${name}.queries.json`;
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>) : {};
}

function table(summary: ProfileSummary, key: 'byPackage' | 'byFunction'): string {
  return [
    '| where | self ms | % of busy |',
    '|---|---:|---:|',
    ...summary[key].map((row) => `| \`${row.name.replaceAll('|', '\\|')}\` | ${round(row.ms, 0)} | ${round(row.percent, 1)} |`),
  ].join('\n');
}

rmSync(PROF_DIR, { recursive: true, force: true });
await freshDatabase();
const stack = await Stack.start({ workers: 1, profile: true });
const lines: string[] = [];
let serverStats = false;
let walRecords = false;
let backendsBefore: BackendTicks = new Map();
let walFrom = '0/0';
const beginServerSection = async (): Promise<void> => {
  if (serverStats) await resetStatementStats(stack.db);
  if (walRecords) walFrom = await currentLsn(stack.db);
  backendsBefore = await backendTicks(stack.db);
};
const serverSection = async (units: number, unit: string): Promise<string[]> => [
  '## PostgreSQL: CPU by client',
  '',
  ...backendCpuTable(backendsBefore, await backendTicks(stack.db), units, unit),
  ...(serverStats
    ? [
        '## PostgreSQL: time per statement shape (pg_stat_statements)',
        '',
        ...statementTable(await readStatementStats(stack.db), units, unit),
      ]
    : [
        '(No server-side table: PostgreSQL was not started with pg_stat_statements in shared_preload_libraries, or this user may not use it. Load it and restart the server to get one.)',
        '',
      ]),
  ...(walRecords
    ? [
        '## PostgreSQL: WAL by table and record kind (pg_walinspect)',
        '',
        ...walTables(await readWalRecords(stack.db, walFrom, await currentLsn(stack.db)), units, unit),
      ]
    : ['(No WAL table: pg_walinspect needs PostgreSQL 15 or later and a superuser, or a role with pg_read_server_files.)', '']),
];
try {
  serverStats = await statementStatsAvailable(stack.db);
  walRecords = await walRecordsAvailable(stack.db);
  const org = await seedPipelineOrg(stack, `prof-${Date.now().toString(36)}`, tasks, 1);
  if (reads) {
    // One read endpoint under load instead of the pipeline: tasks | stages | result.
    await bulkTasks(stack, org.id, 997, 'seeded');
    await burstSample(stack, org, 100);
    const runIds = (await stack.db.query<{ id: string }>('select id from runs')).rows.map((row) => row.id);
    const resultIds = (await stack.db.query<{ id: string }>('select id from task_results')).rows.map((row) => row.id);
    const paths =
      reads === 'tasks'
        ? [1, 2, 3, 4, 5].map((page) => `/api/v2/organizations/${org.name}/tasks?page%5Bsize%5D=20&page%5Bnumber%5D=${page}`)
        : reads === 'stages'
          ? runIds.map((id) => `/api/v2/runs/${id}/task-stages`)
          : resultIds.map((id) => `/api/v2/task-results/${id}`);
    await stack.loadgen.call({ cmd: 'get', baseUrl: stack.baseUrl, token: org.token, paths, concurrency, seconds: 4 });
    await dumpCounts(stack);
    await beginServerSection();
    const result = await stack.loadgen.call<{ count: number; p99: number }>({
      cmd: 'get',
      baseUrl: stack.baseUrl,
      token: org.token,
      paths,
      concurrency,
      seconds: 10,
    });
    await dumpCounts(stack);
    const counts = readCounts('api');
    lines.push(
      `# Profile: GET ${reads} under ${concurrency} clients (${new Date().toISOString()})`,
      '',
      `${result.count} requests in 10 s, p99 ${round(result.p99, 1)} ms`,
      '',
    );
    lines.push('| per request | statement |', '|---:|---|');
    for (const [statement, count] of Object.entries(counts).slice(0, 20))
      lines.push(`| ${round(count / result.count, 2)} | \`${statement.replaceAll('|', '\\|')}\` |`);
    lines.push('', ...planTable('api'), ...(await serverSection(result.count, 'request')));
  } else {
    // The profiles cover each process's whole life, so an open-loop profile warms up at its own rate.
    log(
      `warm-up: ${
        rate === undefined
          ? describeSample((await burstSample(stack, org, options.quick ? 40 : Math.round(900 / tasks))).sample)
          : describeLatency(await openSample(stack, org, rate, options.quick ? 3 : 15))
      }`,
    );
    await dumpCounts(stack);
    await beginServerSection();
    let described: string;
    let completed: number;
    if (rate === undefined) {
      const runs = options.quick ? 60 : Math.round(600 / tasks);
      const { sample } = await burstSample(stack, org, runs);
      described = describeSample(sample);
      completed = sample.completed;
    } else {
      const sample = await openSample(stack, org, rate, options.quick ? 5 : 20);
      described = `open loop at ${rate} runs/s: ${describeLatency(sample)}`;
      completed = sample.runs;
    }
    log(`profiled sample: ${described}`);
    await dumpCounts(stack);
    lines.push(`# Profile: H1 pipeline, 2 stages × ${tasks} tasks, 1 worker (${new Date().toISOString()})`, '');
    lines.push(
      `Sample: ${described}. Processes ran with --cpu-prof and the statement counter, so absolute figures are slower than the benchmark's.`,
      '',
    );
    for (const name of ['api', 'worker-1']) {
      const counts = readCounts(name);
      const total = Object.values(counts).reduce((sum, count) => sum + count, 0);
      lines.push(
        `## SQL statements per run: ${name} (${round(total / completed, 1)} per run)`,
        '',
        '| per run | statement |',
        '|---:|---|',
      );
      for (const [statement, count] of Object.entries(counts).slice(0, 40)) {
        lines.push(`| ${round(count / completed, 2)} | \`${statement.replaceAll('|', '\\|')}\` |`);
      }
      lines.push('');
    }
    for (const name of ['api', 'worker-1']) lines.push(...planTable(name));
    lines.push(...(await serverSection(completed, 'run')));
  }
} finally {
  await stack.stop();
}
for (const file of readdirSync(PROF_DIR).filter((name) => name.endsWith('.cpuprofile'))) {
  const summary = summarise(`${PROF_DIR}/${file}`, 30);
  lines.push(`## CPU profile: ${file.split('.')[0]} (busy ${round(summary.totalMs, 0)} ms over the whole process life)`, '');
  lines.push('By package:', '', table(summary, 'byPackage'), '', 'By function (self time):', '', table(summary, 'byFunction'), '');
}
const out = `${RESULTS_DIR}/profile-${reads ?? (rate === undefined ? 'pipeline' : 'open')}-latest.md`;
writeFileSync(out, `${lines.join('\n')}\n`);
log(`wrote ${out} (raw profiles in ${PROF_DIR})`);
