/**
 * `runtasks`: the Run Tasks service's CLI for pipelines that run Terraform themselves. HTTP only (no
 * dependencies), Node 22 or later. See docs/pipelines.md, or `runtasks --help`.
 */
import { appendFile } from 'node:fs/promises';
import { parseCli, USAGE, wantsJson, type Command, type Options, type Parsed } from './args.ts';
import { Client, type Document } from './client.ts';
import { confirmRun, endRun, reportApply, reportPlan, runPageOf, startRun, type Step } from './commands.ts';
import { CliError, EXIT, type ExitCode } from './exit-codes.ts';
import { follow } from './follow.ts';
import { annotations } from './github.ts';
import { isLiveTerminal, liveReporter, plainReporter, resultLine, type Reporter } from './output.ts';
import { planCountsOf, planLine, type PlanCounts } from './plan-counts.ts';
import { renderSummary } from './summary.ts';
import { resultsOf, warningsOf, type RunState, type Verdict } from './verdict.ts';
import { cliVersion } from './version.ts';
import { exchangeIdentity } from './ci-identity.ts';

const EXIT_OF: Record<Verdict['kind'], ExitCode> = { go: EXIT.ok, blocked: EXIT.blocked, stopped: EXIT.stopped, wait: EXIT.stopped };

function reporterFor(options: Options): Reporter {
  if (options.output === 'json') return plainReporter({ write: (text) => process.stderr.write(text), isTTY: false });
  const out = { write: (text: string) => process.stdout.write(text), isTTY: process.stdout.isTTY === true };
  return isLiveTerminal(process.stdout, process.env) ? liveReporter(out) : plainReporter(out);
}

/** What is known of the run when the command ends, for the verdict line of an error too. */
interface Known {
  runId?: string;
  page?: string;
}

/** The run's page for people: its workspace's `self-html` link, read once; none for a run the token cannot see. */
async function pageOf(client: Client, runId: string): Promise<string | undefined> {
  const run = await client.request<Document>('GET', `/runs/${runId}?include=workspace`).catch(() => undefined);
  const workspace = run?.included?.find((doc) => doc.type === 'workspaces');
  return workspace ? runPageOf(client.address, { data: workspace }, runId) : undefined;
}

async function attributesOf(client: Client, path: string): Promise<Record<string, unknown> | undefined> {
  const doc = await client.request<Document>('GET', path).catch(() => undefined);
  return doc ? { id: doc.data.id, ...doc.data.attributes } : undefined;
}

const oneLine = (text: string): string => text.replace(/\s+/g, ' ').trim();

/** Why the verdict is what it is, in the words of whoever said so: the blocking task's message, or Terraform's reported failure. */
function because(
  verdict: Verdict,
  state: RunState,
  plan: Record<string, unknown> | undefined,
  apply: Record<string, unknown> | undefined,
): string | null {
  if ((verdict.kind === 'blocked' || verdict.kind === 'wait') && verdict.blocker?.results.length) {
    return verdict.blocker.results.map((result) => `${result.task}: ${oneLine(result.message ?? result.status)}`).join('; ');
  }
  if (verdict.kind === 'stopped' && state.status === 'errored') {
    const failed = [plan, apply].find((item) => typeof item?.['error-message'] === 'string' && item['error-message'] !== '');
    if (failed) return `${failed === plan ? 'the plan' : 'the apply'}: ${oneLine(String(failed['error-message']))}`;
  }
  return null;
}

/** The one line every exit prints on stderr: the verdict, why, and where to look. */
export function verdictLine(command: Command, verdict: Verdict, state: RunState, why: string | null, page: string): string {
  const reason = 'reason' in verdict ? verdict.reason : '';
  const ending = command === 'cancel' || command === 'discard';
  const head =
    verdict.kind === 'go'
      ? `${ending ? 'ended' : 'go on'}: run ${state.id} is ${state.status}`
      : `${verdict.kind === 'blocked' ? 'blocked' : 'stopped'}: run ${state.id}: ${verdict.kind === 'wait' ? `still ${state.status}` : reason}`;
  const resume =
    verdict.kind === 'stopped' && reason.includes('--timeout')
      ? ` (the run goes on: runtasks run watch ${state.id}, or end it: runtasks run cancel ${state.id})`
      : '';
  return `runtasks: ${head}${why ? ` - ${why}` : ''}${resume} ${page}`.trimEnd();
}

async function appendSummaries(options: Options, markdown: string): Promise<void> {
  const files = new Set([options.summary ?? options.github?.stepSummary].filter((file): file is string => Boolean(file)));
  for (const file of files) {
    await appendFile(file, `${markdown}\n`).catch((error: Error) => {
      throw new CliError('usage', `cannot write the summary to ${file}: ${error.message}`);
    });
  }
}

async function execute(options: Options, reporter: Reporter, known: Known): Promise<number> {
  // No stored token: the CI's identity token, exchanged at the service (docs/sso.md).
  const token = options.token ?? (options.identity ? await exchangeIdentity(options.address, options.identity) : '');
  const client = new Client(options.address, token);
  client.retryUntil(Date.now() + options.timeoutMs, {
    lost: (reason, until) =>
      reporter.line(
        `runtasks: lost the service at ${options.address} (${reason})${known.runId ? `; run ${known.runId} goes on there` : ''}; retrying until ${until.toISOString()} (--timeout)`,
      ),
    regained: (ms) => reporter.line(`runtasks: the service at ${options.address} answers again (after ${Math.round(ms / 1000)} s)`),
  });
  const deadline = Date.now() + options.timeoutMs;
  const identity = await client.ping();
  if (options.fromTfeEnv && !identity.version) {
    throw new CliError(
      'network',
      `${options.address} (from TFE_ADDRESS) does not say it is the Run Tasks service (no X-Runtasks-Version on /api/v2/ping): ` +
        'it may be HCP Terraform or Terraform Enterprise; the token was not sent. Set RUNTASKS_ADDRESS and RUNTASKS_TOKEN',
    );
  }
  const step: Step = { client, options, say: (line) => reporter.line(line) };
  if (options.run) {
    known.runId = options.run;
    known.page = await pageOf(client, options.run);
  }
  const runId = await {
    start: () => startRun(step),
    plan: () => reportPlan(step),
    apply: () => confirmRun(step),
    applied: () => reportApply(step),
    watch: async () => options.run as string,
    cancel: () => endRun(step),
    discard: () => endRun(step),
  }[options.command]();
  known.runId = runId;
  known.page ??= await pageOf(client, runId);
  const page = known.page ?? `${options.address}/api/v2/runs/${runId}`;
  const { state, verdict } = await follow(client, options.command, runId, { ...options, deadline, page }, reporter);
  reporter.stop();
  const stages = resultsOf(options.command, state);
  const plan = await attributesOf(client, `/runs/${runId}/plan`);
  const apply = state.status === 'errored' && !plan?.['error-message'] ? await attributesOf(client, `/runs/${runId}/apply`) : undefined;
  const why = because(verdict, state, plan, apply);
  const counts = planCountsOf(plan);
  await appendSummaries(
    options,
    renderSummary({ command: options.command, runId, page, runStatus: state.status, stages, verdict, because: why, plan: counts }),
  );
  const code = EXIT_OF[verdict.kind];
  const line = verdictLine(options.command, verdict, state, why, page);
  if (options.github) for (const annotation of annotations(stages, verdict, page)) process.stderr.write(`${annotation}\n`);
  if (options.output === 'json') {
    process.stdout.write(`${JSON.stringify(jsonDocument(options, state, verdict, plan, counts, { code, page, why, line }), null, 2)}\n`);
  } else {
    for (const warning of verdict.kind === 'go' ? warningsOf(stages) : []) reporter.line(`warning: ${resultLine(warning).trim()}`);
    const countsLine = planLine(counts);
    if (countsLine && options.command !== 'start') reporter.line(countsLine);
  }
  process.stderr.write(`${line}\n`);
  return code;
}

function jsonDocument(
  options: Options,
  state: RunState,
  verdict: Verdict,
  plan: Record<string, unknown> | undefined,
  counts: PlanCounts | null,
  end: { code: number; page: string; why: string | null; line: string },
) {
  const stages = resultsOf(options.command, state);
  const blocker = 'blocker' in verdict ? verdict.blocker : undefined;
  const task = blocker?.results[0];
  return {
    command: options.command,
    run: { id: state.id, status: state.status, url: end.page, 'api-url': `${options.address}/api/v2/runs/${state.id}` },
    verdict: verdict.kind,
    reason: 'reason' in verdict ? verdict.reason : null,
    because: end.why,
    task: task
      ? { stage: task.stage, 'stage-id': blocker?.stageId, name: task.task, status: task.status, message: task.message, url: task.url }
      : null,
    'verdict-line': end.line,
    'exit-code': end.code,
    plan: plan ?? null,
    'plan-line': planLine(counts) ?? null,
    stages: stages.map((stage) => ({
      stage: stage.stage,
      id: stage.id,
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
      verdict.kind === 'go'
        ? warningsOf(stages).map((result) => ({ task: result.task, stage: result.stage, status: result.status, message: result.message }))
        : [],
  };
}

/** `runtasks --version`: the CLI's version, and the service's where an address is set. */
async function printVersion(parsed: Extract<Parsed, { kind: 'version' }>): Promise<number> {
  const cli = cliVersion();
  let service: { address: string; version: string | null; error?: string } | null = null;
  let code: number = EXIT.ok;
  if (parsed.address) {
    const client = new Client(parsed.address, '');
    // A version is a quick question: a service that is restarting gets ten seconds, not a step's --timeout.
    client.retryUntil(Date.now() + 10_000);
    try {
      const identity = await client.ping();
      service = { address: parsed.address, version: identity.version ?? null };
    } catch (error) {
      service = { address: parsed.address, version: null, error: (error as Error).message };
      code = (error as CliError).code ?? EXIT.network;
    }
  }
  if (parsed.output === 'json') {
    process.stdout.write(`${JSON.stringify({ cli, service }, null, 2)}\n`);
  } else {
    process.stdout.write(`runtasks ${cli}\n`);
    if (!service) process.stdout.write('service: no address (set RUNTASKS_ADDRESS, or pass --address)\n');
    else if (service.error) process.stdout.write(`service at ${service.address}: ${service.error}\n`);
    else if (!service.version)
      process.stdout.write(`service at ${service.address}: version unknown (it does not send X-Runtasks-Version)\n`);
    else {
      const match = service.version === cli ? 'the same version' : `another version: get its CLI from ${service.address}/cli/runtasks.mjs`;
      process.stdout.write(`service ${service.version} at ${service.address} (${match})\n`);
    }
  }
  return code;
}

async function main(argv: readonly string[]): Promise<number> {
  let options: Options | undefined;
  let reporter: Reporter | undefined;
  const known: Known = {};
  const json = wantsJson(argv);
  try {
    const parsed = parseCli(argv, process.env);
    if (parsed.kind === 'help') {
      process.stdout.write(parsed.text);
      return EXIT.ok;
    }
    if (parsed.kind === 'version') return await printVersion(parsed);
    options = parsed.options;
    reporter = reporterFor(options);
    return await execute(options, reporter, known);
  } catch (error) {
    reporter?.stop();
    // Only our own one-line errors carry their message as is; anything else is a bug, still one line.
    const failure =
      error instanceof CliError ? error : new CliError('network', `unexpected error: ${(error as Error)?.message ?? String(error)}`);
    const where = known.page;
    if (json) {
      const document = {
        command: options?.command ?? null,
        ...(known.runId && { run: { id: known.runId, url: where } }),
        error: { kind: failure.kind, message: failure.message },
        'exit-code': failure.code,
      };
      process.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
    }
    process.stderr.write(`runtasks: ${failure.message}${where && !failure.message.includes(where) ? ` ${where}` : ''}\n`);
    if (failure.showUsage && !json) process.stderr.write(`\n${USAGE}`);
    return failure.code;
  }
}

process.exitCode = await main(process.argv.slice(2));
