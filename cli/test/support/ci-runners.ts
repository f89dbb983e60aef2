/**
 * Just enough of GitHub Actions' and GitLab CI's runners to carry out the CI examples' own steps in a
 * shell, as a runner would: the workflow's expressions and `if:` conditions, step outputs, the job's
 * status and cancellation, the composite action of this repository; GitLab's `extends`, `!reference`,
 * before/after scripts with CI_JOB_STATUS, and dotenv reports between jobs. Steps that set up the
 * runner (checkout, setup-node, setup-terraform, installing Terraform) are left out: the test's PATH has
 * Node and the stand-in terraform.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { evaluate, interpolate, isTruthy, type ExpressionContext, type Value } from './github-expressions.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const STAND_IN_TERRAFORM_DIR = join(ROOT, 'test/support/stand-in-terraform');
export const EXAMPLE = (name: string): string => join(ROOT, 'examples/ci', name);

/** PATH for a job: the test's Node (22 or later, which the CLI needs) and the stand-in terraform first. */
export const jobPath = (): string => [dirname(process.execPath), STAND_IN_TERRAFORM_DIR, process.env['PATH'] ?? ''].join(':');

export interface ShellResult {
  code: number | null;
  output: string;
}

export interface RunningShell {
  child: ChildProcess;
  /** Signals the shell's whole process group. */
  signal(name: NodeJS.Signals): void;
  output(): string;
  done: Promise<ShellResult>;
}

/** `bash -eo pipefail` on a script, as both runners run one, with stdout and stderr in one log. */
export function shell(script: string, env: Record<string, string>, cwd: string): RunningShell {
  // A process group of its own: a cancel signals the shell and what it runs, as a runner does.
  const child = spawn('bash', ['--noprofile', '--norc', '-eo', 'pipefail', '-c', script], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const done = new Promise<ShellResult>((resolve) => child.once('close', (code) => resolve({ code, output })));
  const signal = (name: NodeJS.Signals): void => {
    if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, name);
  };
  return { child, signal, output: () => output, done };
}

/** GitHub's key=value and heredoc (`key<<EOF`) lines of GITHUB_OUTPUT. */
function readOutputs(file: string): Record<string, string> {
  const outputs: Record<string, string> = {};
  if (!existsSync(file)) return outputs;
  const lines = readFileSync(file, 'utf8').split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i] ?? '';
    const heredoc = /^([^=<]+)<<(.+)$/.exec(line);
    if (heredoc) {
      const end = lines.indexOf(heredoc[2] ?? '', i + 1);
      outputs[heredoc[1] ?? ''] = lines.slice(i + 1, end).join('\n');
      i = end;
    } else if (line.includes('=')) {
      outputs[line.slice(0, line.indexOf('='))] = line.slice(line.indexOf('=') + 1);
    }
  }
  return outputs;
}

interface GithubStep {
  name?: string;
  id?: string;
  if?: string;
  run?: string;
  uses?: string;
  with?: Record<string, string>;
  env?: Record<string, string>;
  'continue-on-error'?: boolean;
  'working-directory'?: string;
  shell?: string;
}

export interface StepRecord {
  name: string;
  outcome: 'success' | 'failure' | 'skipped' | 'cancelled';
  code: number | null;
  output: string;
}

export interface GithubJobOptions {
  /** The repository's files, with `infra/` as the example's working directory. */
  workspace: string;
  env: Record<string, string>;
  secrets: Record<string, string>;
  github: Record<string, string>;
  /** Inputs to give `uses:` steps, by step name (the pinned SHA-256, say). */
  withOverrides?: Record<string, Record<string, string>>;
  /** Called as each step starts: may cancel the job while it runs (as a person pressing "Cancel"). */
  onStep?: (name: string, running: RunningShell, job: { cancel(): void }) => void | Promise<void>;
  /** Steps to carry out twice in a row (a retried step), by name. */
  twice?: readonly string[];
  /** Called before a step that is carried out starts (to change the workspace under it). */
  beforeStep?: (name: string) => void | Promise<void>;
}

const SETUP_ACTIONS = /^(actions\/checkout|actions\/setup-node|hashicorp\/setup-terraform)@/;
const STATUS_FUNCTIONS = /\b(success|failure|cancelled|always)\(\)/;

/** Runs the one job of the GitHub example (or any one-job workflow) and returns what each step did. */
export async function runGithubJob(workflowFile: string, options: GithubJobOptions): Promise<StepRecord[]> {
  const workflow = parse(readFileSync(workflowFile, 'utf8')) as {
    env?: Record<string, string>;
    jobs: Record<string, { defaults?: { run?: { 'working-directory'?: string } }; steps: GithubStep[] }>;
  };
  const [jobName, job] = Object.entries(workflow.jobs)[0] ?? [];
  if (!job || !jobName) throw new Error('no job');
  const temp = join(options.workspace, '.runner-temp');
  mkdirSync(temp, { recursive: true });
  const files = { output: join(temp, 'output'), summary: join(temp, 'summary.md'), path: join(temp, 'path') };
  writeFileSync(files.summary, '');
  const steps: Record<string, { outputs: Record<string, string>; outcome: string; conclusion: string }> = {};
  let failed = false;
  let cancelled = false;
  const records: StepRecord[] = [];
  const env: Record<string, string> = {};
  const context = (inputs: Record<string, string> = {}): ExpressionContext => ({
    lookup([head, ...rest]) {
      const root: Record<string, unknown> = {
        env: { ...options.env, ...env },
        secrets: options.secrets,
        github: options.github,
        steps,
        runner: { temp },
        inputs,
      };
      let value: unknown = root[head ?? ''];
      for (const key of rest) value = value && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
      return (value ?? null) as Value;
    },
    call(name) {
      if (name === 'success') return !failed && !cancelled;
      if (name === 'failure') return failed && !cancelled;
      if (name === 'cancelled') return cancelled;
      if (name === 'always') return true;
      throw new Error(`unknown function ${name}()`);
    },
  });
  for (const [key, value] of Object.entries(workflow.env ?? {})) env[key] = options.env[key] ?? interpolate(String(value), context());
  Object.assign(env, options.env);
  const paths: string[] = [];
  const baseEnv = (): Record<string, string> => ({
    ...env,
    PATH: [...paths, jobPath()].join(':'),
    HOME: process.env['HOME'] ?? '/tmp',
    CI: 'true',
    GITHUB_ACTIONS: 'true',
    GITHUB_JOB: jobName,
    GITHUB_OUTPUT: files.output,
    GITHUB_STEP_SUMMARY: files.summary,
    GITHUB_PATH: files.path,
    RUNNER_TEMP: temp,
    GITHUB_REPOSITORY: options.github['repository'] ?? '',
    GITHUB_RUN_ID: options.github['run_id'] ?? '',
    GITHUB_RUN_ATTEMPT: options.github['run_attempt'] ?? '1',
  });

  const runScript = async (name: string, script: string, stepEnv: Record<string, string>, cwd: string): Promise<ShellResult> => {
    writeFileSync(files.output, '');
    writeFileSync(files.path, '');
    const running = shell(script, { ...baseEnv(), ...stepEnv }, cwd);
    await options.onStep?.(name, running, {
      cancel: () => {
        cancelled = true;
        running.signal('SIGINT');
      },
    });
    const result = await running.done;
    if (existsSync(files.path)) paths.unshift(...readFileSync(files.path, 'utf8').split('\n').filter(Boolean));
    return result;
  };

  for (const step of job.steps) {
    const name = step.name ?? step.uses ?? step.run?.split('\n')[0] ?? 'step';
    if (step.uses && SETUP_ACTIONS.test(step.uses)) continue;
    const condition = step.if ?? 'success()';
    const guarded = STATUS_FUNCTIONS.test(condition) ? condition : `success() && (${condition})`;
    if (!isTruthy(evaluate(guarded.replace(/^\$\{\{(.*)\}\}$/s, '$1'), context()))) {
      if (step.id) steps[step.id] = { outputs: {}, outcome: 'skipped', conclusion: 'skipped' };
      records.push({ name, outcome: 'skipped', code: null, output: '' });
      continue;
    }
    await options.beforeStep?.(name);
    const stepEnv = Object.fromEntries(Object.entries(step.env ?? {}).map(([key, value]) => [key, interpolate(String(value), context())]));
    let result: ShellResult;
    let outputs: Record<string, string> = {};
    if (step.uses) {
      // This repository's composite action, as `uses: <owner>/runtasks@<tag>` fetches it.
      const action = parse(readFileSync(join(ROOT, 'action.yml'), 'utf8')) as {
        runs: { steps: GithubStep[] };
        outputs?: Record<string, { value: string }>;
      };
      const inputs = Object.fromEntries(
        Object.entries({ ...step.with, ...options.withOverrides?.[name] }).map(([key, value]) => [
          key,
          interpolate(String(value), context()),
        ]),
      );
      result = { code: 0, output: '' };
      for (const inner of action.runs.steps) {
        const innerEnv = Object.fromEntries(
          Object.entries(inner.env ?? {}).map(([key, value]) => [key, interpolate(String(value), context(inputs))]),
        );
        result = await runScript(name, interpolate(inner.run ?? '', context(inputs)), innerEnv, options.workspace);
        outputs = { ...outputs, ...readOutputs(files.output) };
        if (result.code !== 0) break;
      }
    } else {
      const cwd = join(options.workspace, step['working-directory'] ?? job.defaults?.run?.['working-directory'] ?? '.');
      const script = interpolate(step.run ?? '', context());
      result = await runScript(name, script, stepEnv, cwd);
      outputs = readOutputs(files.output);
      if (options.twice?.includes(name) && !cancelled) {
        const again = await runScript(name, script, stepEnv, cwd);
        result = { code: again.code, output: `${result.output}${again.output}` };
        outputs = { ...outputs, ...readOutputs(files.output) };
      }
    }
    const outcome: StepRecord['outcome'] = cancelled && result.code !== 0 ? 'cancelled' : result.code === 0 ? 'success' : 'failure';
    const conclusion = outcome === 'failure' && step['continue-on-error'] ? 'success' : outcome;
    if (conclusion === 'failure') failed = true;
    if (step.id) steps[step.id] = { outputs, outcome, conclusion };
    records.push({ name, outcome, code: result.code, output: result.output });
  }
  return records;
}

/** GitLab's `!reference [job, key]`, kept as a marker to resolve once the whole file is read. */
const GITLAB_TAGS = [
  {
    tag: '!reference',
    collection: 'seq' as const,
    resolve: (seq: { toJSON(): unknown }) => ({ reference: seq.toJSON() as [string, string] }),
  },
];

type GitlabScript = (string | { reference: [string, string] })[];
interface GitlabJob {
  extends?: string;
  stage?: string;
  variables?: Record<string, string>;
  before_script?: GitlabScript;
  script?: GitlabScript;
  after_script?: GitlabScript;
  artifacts?: { reports?: { dotenv?: string } };
}

export interface GitlabPipeline {
  /** The jobs' definitions with `extends` merged and `!reference` resolved (the template included). */
  job(name: string): { script: string; afterScript: string; variables: Record<string, string>; dotenv: string | undefined };
  variables: Record<string, string>;
}

/** The GitLab example with the CI template of this repository included, as `include: project:` does. */
export function loadGitlabPipeline(file: string, skip: readonly string[] = ['.terraform-install']): GitlabPipeline {
  const own = parse(readFileSync(file, 'utf8'), { customTags: GITLAB_TAGS }) as Record<string, unknown>;
  const template = parse(readFileSync(join(ROOT, 'templates/runtasks.gitlab-ci.yml'), 'utf8'), { customTags: GITLAB_TAGS }) as Record<
    string,
    unknown
  >;
  const all = { ...template, ...own } as Record<string, GitlabJob>;
  const merged = (name: string): GitlabJob => {
    const job = all[name];
    if (!job) throw new Error(`no job ${name}`);
    return job.extends ? { ...merged(job.extends), ...job, variables: { ...merged(job.extends).variables, ...job.variables } } : job;
  };
  const lines = (script: GitlabScript | undefined): string[] =>
    (script ?? []).flatMap((line) => {
      if (typeof line === 'string') return [line];
      const [job, key] = line.reference;
      if (skip.includes(job)) return [];
      return lines((all[job] as unknown as Record<string, GitlabScript>)[key]);
    });
  return {
    variables: (own['variables'] ?? {}) as Record<string, string>,
    job(name) {
      const job = merged(name);
      return {
        script: [...lines(job.before_script), ...lines(job.script)].join('\n'),
        afterScript: lines(job.after_script).join('\n'),
        variables: job.variables ?? {},
        dotenv: job.artifacts?.reports?.dotenv,
      };
    },
  };
}

export interface GitlabJobRun {
  status: 'success' | 'failed' | 'canceled';
  output: string;
  afterOutput: string;
  /** The job's dotenv report, for the jobs after it. */
  dotenv: Record<string, string>;
}

/** Runs one GitLab job in `projectDir`: its script, then its after_script with CI_JOB_STATUS, then reads its dotenv report. */
export async function runGitlabJob(
  pipeline: GitlabPipeline,
  name: string,
  options: {
    projectDir: string;
    variables: Record<string, string>;
    onStart?: (running: RunningShell, job: { cancel(): void }) => void | Promise<void>;
  },
): Promise<GitlabJobRun> {
  const job = pipeline.job(name);
  const env: Record<string, string> = {
    HOME: process.env['HOME'] ?? '/tmp',
    PATH: jobPath(),
    CI: 'true',
    GITLAB_CI: 'true',
    CI_PROJECT_DIR: options.projectDir,
    CI_JOB_NAME: name,
    ...pipeline.variables,
    ...job.variables,
    ...options.variables,
  };
  // The runner echoes each command and stops at the first that fails: `bash -e` does the latter.
  const running = shell(job.script, env, options.projectDir);
  let canceled = false;
  await options.onStart?.(running, {
    cancel: () => {
      canceled = true;
      running.signal('SIGTERM');
    },
  });
  const result = await running.done;
  const status: GitlabJobRun['status'] = canceled ? 'canceled' : result.code === 0 ? 'success' : 'failed';
  const after = job.afterScript ? await shell(job.afterScript, { ...env, CI_JOB_STATUS: status }, options.projectDir).done : { output: '' };
  const dotenv: Record<string, string> = {};
  const report = job.dotenv ? join(options.projectDir, job.dotenv) : undefined;
  if (report && existsSync(report)) {
    for (const line of readFileSync(report, 'utf8').split('\n')) {
      if (line.includes('=')) dotenv[line.slice(0, line.indexOf('='))] = line.slice(line.indexOf('=') + 1);
    }
  }
  appendFileSync(join(options.projectDir, 'jobs.log'), `== ${name} (${status})\n${result.output}\n${after.output}\n`);
  return { status, output: result.output, afterOutput: after.output, dotenv };
}

/** The GitHub example's job as a push to main of acme/infra: the service, its token, the workspace, the CLI's pin. */
export async function pushToMain(
  service: { baseUrl: string; token: string; workspace: string },
  checkout: string,
  planJson: string,
): Promise<GithubJobOptions> {
  const sha256 = (await (await fetch(`${service.baseUrl}/cli/runtasks.mjs.sha256`)).text()).split(' ')[0] ?? '';
  return {
    workspace: checkout,
    env: { RUNTASKS_ADDRESS: service.baseUrl, RUNTASKS_WORKSPACE: service.workspace, STANDIN_TERRAFORM_PLAN_JSON: planJson },
    secrets: { RUNTASKS_TOKEN: service.token },
    github: {
      event_name: 'push',
      ref: 'refs/heads/main',
      sha: 'c0ffee',
      server_url: 'https://github.example.com',
      repository: 'acme/infra',
      run_id: String(Date.now()),
      run_attempt: '1',
    },
    withOverrides: { 'Install the runtasks CLI': { sha256 } },
  };
}
