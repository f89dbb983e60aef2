import { type RunStage } from '@runtasks/shared/domain';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRunTaskServer, type RunTaskServer, type TaskResultStatus } from '../../../examples/run-task-server/server.ts';
import { api, attachTask, createTask, uniqueName, type Fixture } from '../../../test/support/fixtures.ts';
import type { Harness } from '../../../test/support/harness.ts';

/** The CLI as a pipeline runs it: the real bin, spawned with Node, its output and exit code. */
export const BIN = fileURLToPath(new URL('../../bin/runtasks.js', import.meta.url));
export const PLAN_FIXTURE = fileURLToPath(new URL('../fixtures/plan.json', import.meta.url));
/** What the plan fixture counts, as HCP counts a `terraform show -json` plan (a replacement adds and destroys). */
export const PLAN_FIXTURE_COUNTS = { 'resource-additions': 3, 'resource-changes': 1, 'resource-destructions': 2, 'resource-imports': 0 };

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliProcess {
  done: Promise<CliRun>;
  output(): string;
}

/** Starts `runtasks ARGS` in CI mode (plain lines) against `address` with `token`, polling every 0.2 s. */
export function startCli(args: string[], address: string, token: string, env: Record<string, string> = {}): CliProcess {
  const child = spawn(process.execPath, [BIN, ...args, '--poll-interval', '0.2', '--timeout', '60'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env['PATH'] ?? '', CI: 'true', RUNTASKS_ADDRESS: address, RUNTASKS_TOKEN: token, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const done = new Promise<CliRun>((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
  return { done, output: () => stdout + stderr };
}

export const runCli = (args: string[], address: string, token: string, env: Record<string, string> = {}): Promise<CliRun> =>
  startCli(args, address, token, env).done;

/** A configuration directory with a main.tf, a variables file .terraformignore leaves out, and a .terraform/ cache. */
export function configDirectory(): string {
  const dir = mkdtempSync(join(tmpdir(), 'runtasks-cli-e2e-'));
  writeFileSync(join(dir, 'main.tf'), 'resource "null_resource" "example" {}\n');
  writeFileSync(join(dir, 'secret.auto.tfvars'), 'password = "hunter2"\n');
  writeFileSync(join(dir, '.terraformignore'), '*.tfvars\n');
  return dir;
}

export interface TaskSpec {
  name: string;
  result: TaskResultStatus;
  enforcement: 'mandatory' | 'advisory';
  stages: RunStage[];
  /** How long the task server waits before its callback (a slow task). */
  callbackDelayMs?: number;
}

/** A local workspace with one example task server per spec, registered and attached through the API. */
export async function localWorkspace(
  h: Harness,
  owner: Fixture,
  specs: TaskSpec[],
  servers: RunTaskServer[],
): Promise<{ name: string; id: string; servers: Map<string, RunTaskServer> }> {
  const name = uniqueName('pipeline');
  const res = await api(h, 'post', `/organizations/${owner.organization}/workspaces`, owner.organizationToken, {
    data: { type: 'workspaces', attributes: { name, 'execution-mode': 'local' } },
  });
  if (res.status !== 201) throw new Error(`create workspace: ${res.status} ${res.text}`);
  const id = res.body.data.id as string;
  const byName = new Map<string, RunTaskServer>();
  for (const spec of specs) {
    const server = await startRunTaskServer({
      result: spec.result,
      publicUrl: 'https://tasks.example.test',
      ...(spec.callbackDelayMs !== undefined && { callbackDelayMs: spec.callbackDelayMs }),
    });
    servers.push(server);
    byName.set(spec.name, server);
    // Task names are unique per organization: each scenario seeds its own, so the names stay as given.
    const taskId = await createTask(h, owner, `${server.url}/run-task`, { name: spec.name });
    await attachTask(h, owner, id, taskId, spec.enforcement, spec.stages);
  }
  return { name, id, servers: byName };
}
