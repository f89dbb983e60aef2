/**
 * One side of `npm run bench:compare`: the H1 pipeline, H2's latency or H3's reads, of one checkout (its
 * own harness, processes and migrations), printed as one JSON line on stdout. Run by bench/compare.ts,
 * not by hand.
 *
 * argv: <checkout root> <tasks per stage> <h1|h2|h3> [--quick]
 */
import type * as LatencyModule from './lib/latency.ts';
import type * as PipelineModule from './lib/pipeline.ts';
import type * as ReadsModule from './lib/reads.ts';
import type * as StackModule from './lib/stack.ts';

const [root, tasksArg, figure] = process.argv.slice(2);
if (!root || !tasksArg || (figure !== 'h1' && figure !== 'h2' && figure !== 'h3')) {
  process.stderr.write('usage: compare-side.ts <checkout root> <tasks> <h1|h2|h3> [--quick]\n');
  process.exit(2);
}
const tasks = Number(tasksArg);
const quick = process.argv.includes('--quick');
// The other checkout's harness, typed as ours (the two differ at most in what they measure, not in shape).
const stack = (await import(`${root}/bench/lib/stack.ts`)) as typeof StackModule;
await stack.freshDatabase();
if (figure === 'h1') {
  const pipeline = (await import(`${root}/bench/lib/pipeline.ts`)) as typeof PipelineModule;
  const result = await pipeline.runPipeline(
    { key: `cmp${Date.now() % 100_000}`, label: `2 × ${tasks}, 1 worker`, tasks, workers: 1, workspaces: 1 },
    { quick, profile: false, redisCluster: false, notifications: 0 },
  );
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else if (figure === 'h2') {
  // H2's own configuration (2 × 3, one worker, 20 runs/s): its targets are set for that one.
  const latency = (await import(`${root}/bench/lib/latency.ts`)) as typeof LatencyModule;
  process.stdout.write(`${JSON.stringify(await latency.runLatency({ quick, profile: false, redisCluster: false, notifications: 0 }))}\n`);
} else {
  const reads = (await import(`${root}/bench/lib/reads.ts`)) as typeof ReadsModule;
  // Both sides' lean reference is the same code: it would add a minute a side and say nothing.
  const output = await reads.runReads(
    { quick, profile: false, redisCluster: false, notifications: 0 },
    { h3: true, growth: false, lean: false },
  );
  process.stdout.write(`${JSON.stringify(output.h3)}\n`);
}
process.exit(0);
