import { afterAll, beforeAll, expect } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RunTaskServer } from '../../../examples/run-task-server/server.ts';
import { type RunningWorker, startWorker } from '../../../services/worker/src/worker.ts';
import { api, type Fixture } from '../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../test/support/harness.ts';
import { type CliRun, configDirectory, runCli } from './cli-harness.ts';
import { PLAN_JSON_MAX_BYTES } from './e2e-constants.ts';

/** The API and a worker for the CLI to drive, task servers and temporary directories, and the calls the tests make. */
export function useCliService() {
  const g = {} as {
    h: Harness;
    worker: RunningWorker;
  };
  const servers: RunTaskServer[] = [];
  const dirs: string[] = [];

  beforeAll(async () => {
    g.h = await startHarness({
      reachableBaseUrl: true,
      env: { SWEEPER_INTERVAL_SECONDS: '0.5', PLAN_JSON_MAX_BYTES: String(PLAN_JSON_MAX_BYTES) },
    });
    g.worker = await startWorker({
      config: g.h.config,
      orm: g.h.orm,
      logger: g.h.logger,
      secrets: g.h.secrets,
      taskClient: g.h.taskClient,
    });
  });
  afterAll(async () => {
    await g.worker.close();
    await Promise.all(servers.map((server) => server.close()));
    await g.h.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  const cli = (args: string[], token: string, env: Record<string, string> = {}): Promise<CliRun> => runCli(args, g.h.baseUrl, token, env);
  const tempDir = (): string => {
    const dir = mkdtempSync(join(tmpdir(), 'runtasks-cli-out-'));
    dirs.push(dir);
    return dir;
  };
  const config = (): string => {
    const dir = configDirectory();
    dirs.push(dir);
    return dir;
  };
  const runOf = async (f: Fixture, runId: string) => (await api(g.h, 'get', `/runs/${runId}?include=plan,apply`, f.organizationToken)).body;
  const statusOf = async (f: Fixture, runId: string): Promise<string> => (await runOf(f, runId)).data.attributes.status as string;

  /** `run start` with JSON output: the run's id from its document. */
  async function start(f: Fixture, workspace: string, extra: string[] = []): Promise<{ result: CliRun; runId: string }> {
    const result = await cli(
      ['run', 'start', '--workspace', `${f.organization}/${workspace}`, '--config-dir', config(), '--output', 'json', ...extra],
      f.organizationToken,
    );
    const runId = (JSON.parse(result.stdout) as { run: { id: string } }).run.id;
    return { result, runId };
  }

  /** Nothing but one line on stderr, and no stack trace anywhere. */
  function expectOneLineError(result: CliRun, code: number, message: RegExp): void {
    expect({ code: result.code, stderr: result.stderr }).toMatchObject({ code, stderr: expect.stringMatching(message) });
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stdout + result.stderr).not.toMatch(/\n\s+at /);
  }
  return Object.assign(g, { servers, dirs, cli, tempDir, config, runOf, statusOf, start, expectOneLineError });
}
