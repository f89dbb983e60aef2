/**
 * One side of `npm run bench:compare`: the H1 pipeline of one checkout (its own harness, processes
 * and migrations), printed as one JSON line on stdout. Run by bench/compare.ts, not by hand.
 *
 * argv: <checkout root> <tasks per stage> [--quick]
 */
import type * as PipelineModule from './lib/pipeline.ts';
import type * as StackModule from './lib/stack.ts';

const [root, tasksArg] = process.argv.slice(2);
if (!root || !tasksArg) {
  process.stderr.write('usage: compare-side.ts <checkout root> <tasks> [--quick]\n');
  process.exit(2);
}
const tasks = Number(tasksArg);
// The other checkout's harness, typed as ours (the two differ at most in what they measure, not in shape).
const pipeline = (await import(`${root}/bench/lib/pipeline.ts`)) as typeof PipelineModule;
const stack = (await import(`${root}/bench/lib/stack.ts`)) as typeof StackModule;
await stack.freshDatabase();
const result = await pipeline.runPipeline(
  { key: `cmp${Date.now() % 100_000}`, label: `2 × ${tasks}, 1 worker`, tasks, workers: 1, workspaces: 1 },
  { quick: process.argv.includes('--quick'), profile: false },
);
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
