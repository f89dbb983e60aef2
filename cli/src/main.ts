/**
 * `runtasks`: the Run Tasks service's CLI for pipelines that run Terraform themselves. HTTP only (no
 * dependencies), Node 24. See docs/pipelines.md, or `runtasks --help`.
 */
import { appendFile } from 'node:fs/promises';
import { parseCli, type Options } from './args.ts';
import { Client, type Document } from './client.ts';
import { confirmRun, reportApply, reportPlan, startRun, type Say } from './commands.ts';
import { CliError, EXIT, type ExitCode } from './exit-codes.ts';
import { follow } from './follow.ts';
import { isLiveTerminal, liveReporter, plainReporter, resultLine, type Reporter } from './output.ts';
import { renderSummary } from './summary.ts';
import { resultsOf, warningsOf, type RunState, type Verdict } from './verdict.ts';

const EXIT_OF: Record<Verdict['kind'], ExitCode> = { go: EXIT.ok, blocked: EXIT.blocked, stopped: EXIT.stopped, wait: EXIT.stopped };

function reporterFor(options: Options): Reporter {
  if (options.output === 'json') return plainReporter({ write: (text) => process.stderr.write(text), isTTY: false });
  const out = { write: (text: string) => process.stdout.write(text), isTTY: process.stdout.isTTY === true };
  return isLiveTerminal(process.stdout, process.env) ? liveReporter(out) : plainReporter(out);
}

/** The plan's resource, for its counts; left out where the service has none to show. */
async function planOf(client: Client, runId: string): Promise<Record<string, unknown> | null> {
  const plan = await client.request<Document>('GET', `/runs/${runId}/plan`).catch(() => undefined);
  return plan ? { id: plan.data.id, ...plan.data.attributes } : null;
}

function planLine(plan: Record<string, unknown> | null): string | undefined {
  if (!plan || plan['status'] !== 'finished') return undefined;
  const n = (key: string): number => Number(plan[key] ?? 0);
  return `plan: ${n('resource-additions')} to add, ${n('resource-changes')} to change, ${n('resource-destructions')} to destroy`;
}

async function execute(options: Options, reporter: Reporter): Promise<number> {
  const client = new Client(options.address, options.token);
  const say: Say = (line) => reporter.line(line);
  await client.ping();
  const runId = await {
    start: () => startRun(client, options, say),
    plan: () => reportPlan(client, options, say),
    apply: () => confirmRun(client, options, say),
    applied: () => reportApply(client, options, say),
    watch: async () => options.run as string,
  }[options.command]();
  const { state, verdict } = await follow(client, options.command, runId, options, reporter);
  reporter.stop();
  const stages = resultsOf(options.command, state);
  const plan = await planOf(client, runId);
  if (options.summary) {
    const markdown = renderSummary({ address: options.address, command: options.command, runId, runStatus: state.status, stages, verdict });
    await appendFile(options.summary, `${markdown}\n`).catch((error: Error) => {
      throw new CliError('usage', `cannot write the summary to ${options.summary}: ${error.message}`);
    });
  }
  const code = EXIT_OF[verdict.kind];
  if (options.output === 'json') {
    process.stdout.write(`${JSON.stringify(jsonDocument(options, state, verdict, plan, code), null, 2)}\n`);
  } else {
    for (const warning of verdict.kind === 'go' ? warningsOf(stages) : []) say(`warning: ${resultLine(warning).trim()}`);
    const counts = planLine(plan);
    if (counts) say(counts);
    say(verdictText(runId, state, verdict));
  }
  return code;
}

function verdictText(runId: string, state: RunState, verdict: Verdict): string {
  if (verdict.kind === 'go') return `run ${runId} is ${state.status}: go on`;
  return `run ${runId}: ${verdict.kind === 'blocked' ? 'blocked' : 'stopped'}: ${verdict.kind === 'wait' ? state.status : verdict.reason}`;
}

function jsonDocument(options: Options, state: RunState, verdict: Verdict, plan: Record<string, unknown> | null, code: number) {
  const stages = resultsOf(options.command, state);
  return {
    command: options.command,
    run: { id: state.id, status: state.status, url: `${options.address}/api/v2/runs/${state.id}` },
    verdict: verdict.kind,
    reason: 'reason' in verdict ? verdict.reason : null,
    'exit-code': code,
    plan,
    stages: stages.map((stage) => ({
      stage: stage.stage,
      status: stage.status,
      results: stage.results.map(({ id, task, enforcement, status, message, url, outcomes }) => ({
        id,
        task,
        enforcement,
        status,
        message,
        url,
        outcomes,
      })),
    })),
    warnings:
      verdict.kind === 'go' ? warningsOf(stages).map((result) => ({ task: result.task, stage: result.stage, status: result.status })) : [],
  };
}

async function main(argv: readonly string[]): Promise<number> {
  let options: Options | undefined;
  let reporter: Reporter | undefined;
  try {
    const parsed = parseCli(argv, process.env);
    if (parsed.kind === 'help') {
      process.stdout.write(parsed.text);
      return EXIT.ok;
    }
    options = parsed.options;
    reporter = reporterFor(options);
    return await execute(options, reporter);
  } catch (error) {
    reporter?.stop();
    // Only our own one-line errors carry their message as is; anything else is a bug, still one line.
    const failure =
      error instanceof CliError ? error : new CliError('network', `unexpected error: ${(error as Error)?.message ?? String(error)}`);
    if (options?.output === 'json') {
      const document = { command: options.command, error: { kind: failure.kind, message: failure.message }, 'exit-code': failure.code };
      process.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
    }
    process.stderr.write(`runtasks: ${failure.message}\n`);
    return failure.code;
  }
}

process.exitCode = await main(process.argv.slice(2));
