/**
 * The pipeline of `npm run demo -- --local`: what a CI job does around Terraform, with the real
 * `runtasks` CLI (cli/bin/runtasks.js) and no Terraform. It uploads a one-file configuration, reports a
 * realistic `terraform show -json` output (the CLI's test plan: resources created, changed and
 * destroyed), confirms the run and reports the apply, each step waiting for its stage's run tasks.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../cli/bin/runtasks.js', import.meta.url));
export const DEMO_PLAN = fileURLToPath(new URL('../cli/test/fixtures/plan.json', import.meta.url));

export interface PipelineOptions {
  address: string;
  token: string;
  workspace: string;
  /** Each line the pipeline prints: the command it runs, the CLI's own lines, its exit code. */
  log: (line: string) => void;
}

export interface Pipeline {
  /** The run's id, as soon as `runtasks run start` has created it. */
  runId: Promise<string>;
  /** Resolves once every step exited 0; rejects with the step that did not. */
  done: Promise<void>;
}

/** Runs one CLI command as a CI job does (plain lines), passing each line on; resolves with its exit code. */
function step(options: PipelineOptions, args: string[], onLine: (line: string) => void = () => undefined): Promise<number> {
  options.log(`$ runtasks ${args.join(' ')}`);
  const child = spawn(process.execPath, [CLI, ...args, '--poll-interval', '0.2'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env['PATH'] ?? '', CI: 'true', RUNTASKS_ADDRESS: options.address, RUNTASKS_TOKEN: options.token },
  });
  const forward = (stream: NodeJS.ReadableStream): void => {
    let rest = '';
    stream.on('data', (chunk: Buffer) => {
      const lines = (rest + chunk.toString('utf8')).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) {
        onLine(line);
        options.log(`  ${line}`);
      }
    });
  };
  forward(child.stdout);
  forward(child.stderr);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      options.log(`  exit ${code ?? 'signal'}`);
      resolve(code ?? 1);
    }),
  );
}

export function runPipeline(options: PipelineOptions): Pipeline {
  let resolveRun: (id: string) => void = () => undefined;
  let rejectRun: (error: Error) => void = () => undefined;
  const runId = new Promise<string>((resolve, reject) => {
    resolveRun = resolve;
    rejectRun = reject;
  });
  runId.catch(() => undefined);
  const config = mkdtempSync(join(tmpdir(), 'runtasks-demo-config-'));
  writeFileSync(join(config, 'main.tf'), 'resource "null_resource" "demo" {}\n');
  const must = async (args: string[], onLine?: (line: string) => void): Promise<void> => {
    const code = await step(options, args, onLine);
    if (code !== 0) throw new Error(`runtasks ${args.slice(0, 2).join(' ')} exited ${code}`);
  };
  const done = (async () => {
    try {
      let id = '';
      const created = (line: string): void => {
        const match = /^run (run-\w+) created/.exec(line);
        if (match?.[1]) resolveRun((id = match[1]));
      };
      await must(
        ['run', 'start', '--workspace', options.workspace, '--config-dir', config, '--message', 'Run Tasks demo (pipeline)'],
        created,
      );
      options.log('(terraform init && terraform plan -out=tfplan && terraform show -json tfplan > plan.json)');
      await must(['run', 'plan', id, '--plan-json', DEMO_PLAN]);
      await must(['run', 'apply', id]);
      options.log('(terraform apply tfplan)');
      await must(['run', 'applied', id]);
    } catch (error) {
      rejectRun(error as Error);
      throw error;
    } finally {
      rmSync(config, { recursive: true, force: true });
    }
  })();
  return { runId, done };
}
