import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunTaskServer } from '../../examples/run-task-server/server.ts';
import { startWorker, type RunningWorker } from '../../services/worker/src/worker.ts';
import {
  api,
  createOrganization,
  createTeam,
  createTeamToken,
  grantWorkspace,
  createOrganizationToken,
  createRun,
  eventually,
  seedOrganization,
  uniqueName,
  type Fixture,
} from '../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../test/support/harness.ts';
import { freePort } from '../../test/support/processes.ts';
import {
  configDirectory,
  localWorkspace,
  PLAN_FIXTURE,
  PLAN_FIXTURE_COUNTS,
  runCli,
  startCli,
  type CliRun,
  type TaskSpec,
} from './support/cli-harness.ts';

/**
 * The CLI end to end: the API and a worker in this process on a fresh database, example run task servers
 * on loopback, and the real `runtasks` bin spawned with Node as a CI job runs it, driving `local`
 * workspaces' runs through every stage. A small PLAN_JSON_MAX_BYTES makes the size limit cheap to reach.
 */
const PLAN_JSON_MAX_BYTES = 64 * 1024;
const E2E_GOLDEN = new URL('./fixtures/e2e-summary.golden.md', import.meta.url);
const ALL: TaskSpec['stages'] = ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'];

describe('runtasks against the real service', () => {
  let h: Harness;
  let worker: RunningWorker;
  const servers: RunTaskServer[] = [];
  const dirs: string[] = [];

  beforeAll(async () => {
    h = await startHarness({
      reachableBaseUrl: true,
      env: { SWEEPER_INTERVAL_SECONDS: '0.5', PLAN_JSON_MAX_BYTES: String(PLAN_JSON_MAX_BYTES) },
    });
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
  });
  afterAll(async () => {
    await worker.close();
    await Promise.all(servers.map((server) => server.close()));
    await h.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  const cli = (args: string[], token: string, env: Record<string, string> = {}): Promise<CliRun> => runCli(args, h.baseUrl, token, env);
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
  const runOf = async (f: Fixture, runId: string) => (await api(h, 'get', `/runs/${runId}?include=plan,apply`, f.organizationToken)).body;
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

  it('drives a local run through every stage: start, plan, apply, applied, with the plan read by the tasks', async () => {
    const f = await seedOrganization(h, uniqueName('cli-flow'));
    const ws = await localWorkspace(
      h,
      f,
      [
        { name: 'pipeline-check', result: 'passed', enforcement: 'mandatory', stages: ALL },
        { name: 'cost-advisor', result: 'failed', enforcement: 'advisory', stages: ['post_plan'] },
      ],
      servers,
    );

    const { result: started, runId } = await start(f, ws.name, ['--message', 'CI pipeline #42']);
    expect(started.code).toBe(0);
    const startDoc = JSON.parse(started.stdout);
    expect(startDoc).toMatchObject({ command: 'start', verdict: 'go', 'exit-code': 0, run: { status: 'planning' } });
    expect(startDoc.stages[0]).toMatchObject({
      stage: 'pre_plan',
      status: 'passed',
      results: [{ task: 'pipeline-check', status: 'passed' }],
    });
    // The archive was uploaded with .terraformignore honoured.
    const cv = (await runOf(f, runId)).data.relationships['configuration-version'].data.id as string;
    const archive = await fetch(`${h.baseUrl}/api/v2/configuration-versions/${cv}/download`, {
      headers: { authorization: `Bearer ${f.organizationToken}` },
    });
    expect(archive.status).toBe(200);
    const archiveFile = join(tempDir(), 'config.tar.gz');
    writeFileSync(archiveFile, Buffer.from(await archive.arrayBuffer()));
    expect(execFileSync('tar', ['-tzf', archiveFile], { encoding: 'utf8' }).trim().split('\n').sort()).toEqual([
      '.terraformignore',
      'main.tf',
    ]);

    const out = tempDir();
    const summary = join(out, 'summary.md');
    const planned = await cli(['run', 'plan', runId, '--plan-json', PLAN_FIXTURE, '--summary', summary], f.organizationToken);
    expect({ code: planned.code, stderr: planned.stderr }).toEqual({ code: 0, stderr: '' });
    // Plain lines in CI: each result, the advisory failure as a warning, the plan's counts, the verdict.
    expect(planned.stdout).not.toContain('\x1b[');
    expect(planned.stdout).toMatch(
      /^ {2}post_plan pipeline-check \(mandatory\): passed - Example check passed: 5 resource changes reviewed\./m,
    );
    expect(planned.stdout).toMatch(/^warning: post_plan cost-advisor \(advisory\): failed \(advisory: warns only\)/m);
    expect(planned.stdout).toContain('plan: 3 to add, 1 to change, 2 to destroy');
    expect(planned.stdout).toContain(`run ${runId} is post_plan_completed: go on`);
    // The summary, with the run's and results' ids and the address made stable, is the golden file.
    const normalized = readFileSync(summary, 'utf8')
      .replaceAll(h.baseUrl, 'http://runtasks.test')
      .replaceAll(runId, 'run-E2E')
      .replace(/taskrs-\w+/g, 'taskrs-ID');
    expect(normalized).toBe(readFileSync(E2E_GOLDEN, 'utf8'));

    const plan = await api(h, 'get', `/runs/${runId}/plan`, f.organizationToken);
    expect(plan.body.data.attributes).toMatchObject({ status: 'finished', 'has-changes': true, ...PLAN_FIXTURE_COUNTS });

    const applied = await cli(['run', 'apply', runId], f.organizationToken);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toMatch(/pre_apply pipeline-check \(mandatory\): passed/);
    expect(applied.stdout).toContain(`run ${runId} is applying: go on`);

    const finished = await cli(['run', 'applied', runId, '--output', 'json'], f.organizationToken);
    expect(finished.code).toBe(0);
    expect(JSON.parse(finished.stdout)).toMatchObject({
      command: 'applied',
      verdict: 'go',
      run: { status: 'post_apply_completed' },
      plan: { status: 'finished', 'has-changes': true, ...PLAN_FIXTURE_COUNTS },
      stages: [{ stage: 'post_apply', status: 'passed', results: [{ task: 'pipeline-check', status: 'passed', outcomes: 1 }] }],
      warnings: [],
    });
    const final = await runOf(f, runId);
    expect(final.data.attributes).toMatchObject({ status: 'post_apply_completed', 'has-task-warnings': true, 'has-changes': true });
    const apply = final.included.find((doc: { type: string }) => doc.type === 'applies');
    expect(apply.attributes).toMatchObject({ status: 'finished', ...PLAN_FIXTURE_COUNTS });

    // The task servers read the plan the pipeline reported, at each stage that has one.
    const check = ws.servers.get('pipeline-check');
    const reads = (check?.requests ?? [])
      .filter((request) => !request.verification)
      .map((request) => [request.payload?.stage, request.plan?.status]);
    expect(reads).toEqual(
      expect.arrayContaining([
        ['post_plan', 200],
        ['pre_apply', 200],
        ['post_apply', 200],
      ]),
    );
    // `watch` on a run that has ended reports every stage at once.
    const watched = await cli(['run', 'watch', runId, '--output', 'json'], f.organizationToken);
    expect(watched.code).toBe(0);
    expect((JSON.parse(watched.stdout).stages as { stage: string }[]).map((stage) => stage.stage)).toEqual(ALL);
  }, 120_000);

  it.each([
    ['pre_plan', 'start'],
    ['post_plan', 'plan'],
    ['pre_apply', 'apply'],
  ] as const)(
    'a mandatory failure at %s makes `run %s` exit 1 and the run errored',
    async (stage, command) => {
      const f = await seedOrganization(h, uniqueName(`cli-block-${stage}`));
      const ws = await localWorkspace(h, f, [{ name: 'gate', result: 'failed', enforcement: 'mandatory', stages: [stage] }], servers);
      const { result: started, runId } = await start(f, ws.name);
      let last = started;
      if (command !== 'start') {
        expect(started.code).toBe(0);
        last = await cli(['run', 'plan', runId, '--plan-json', PLAN_FIXTURE], f.organizationToken);
      }
      if (command === 'apply') {
        expect(last.code).toBe(0);
        last = await cli(['run', 'apply', runId, '--output', 'json'], f.organizationToken);
        expect(JSON.parse(last.stdout)).toMatchObject({ verdict: 'blocked', 'exit-code': 1 });
      }
      expect(last.code).toBe(1);
      expect(last.stdout).toContain(`${stage} blocked by mandatory task gate`);
      expect(await statusOf(f, runId)).toBe('errored');
    },
    90_000,
  );

  it.each([
    ['pre_plan', 'start'],
    ['pre_apply', 'apply'],
  ] as const)(
    'with overrides allowed, a mandatory failure at %s makes `run %s --no-wait-override` exit 1, the run awaiting a decision',
    async (stage, command) => {
      const organization = await createOrganization(h, uniqueName(`cli-hold-${stage}`), { 'task-overrides-enabled': true });
      const f: Fixture = { organization, organizationToken: await createOrganizationToken(h, organization), workspaceId: '', teamId: '' };
      const ws = await localWorkspace(h, f, [{ name: 'gate', result: 'failed', enforcement: 'mandatory', stages: [stage] }], servers);
      let last: CliRun;
      let runId: string;
      if (command === 'start') {
        last = await cli(
          ['run', 'start', '--workspace', `${f.organization}/${ws.name}`, '--config-dir', config(), '--no-wait-override'],
          f.organizationToken,
        );
        runId = /run (run-\w+) created/.exec(last.stdout)?.[1] ?? '';
      } else {
        runId = (await start(f, ws.name)).runId;
        expect((await cli(['run', 'plan', runId, '--plan-json', PLAN_FIXTURE], f.organizationToken)).code).toBe(0);
        last = await cli(['run', 'apply', runId, '--no-wait-override'], f.organizationToken);
      }
      expect(last.code).toBe(1);
      expect(last.stdout).toContain(`${stage} blocked by a mandatory task: the run waits for an override`);
      expect(await statusOf(f, runId)).toBe(`${stage}_awaiting_decision`);
    },
    90_000,
  );

  it('waits for an override where the organization allows one, then `run plan` goes on and exits 0', async () => {
    const organization = await createOrganization(h, uniqueName('cli-override'), { 'task-overrides-enabled': true });
    const f: Fixture = { organization, organizationToken: await createOrganizationToken(h, organization), workspaceId: '', teamId: '' };
    const ws = await localWorkspace(h, f, [{ name: 'gate', result: 'failed', enforcement: 'mandatory', stages: ['post_plan'] }], servers);

    // Without waiting: exit 1 at once, the run still waits for a person.
    const first = await start(f, ws.name);
    const impatient = await cli(['run', 'plan', first.runId, '--plan-json', PLAN_FIXTURE, '--no-wait-override'], f.organizationToken);
    expect(impatient.code).toBe(1);
    expect(impatient.stdout).toContain('waits for an override');
    expect(await statusOf(f, first.runId)).toBe('post_plan_awaiting_decision');
    // A run awaiting a decision holds its workspace: the next run would wait behind it.
    expect((await api(h, 'post', `/runs/${first.runId}/actions/discard`, f.organizationToken, {})).status).toBe(202);

    const { runId } = await start(f, ws.name);
    const waiting = startCli(['run', 'plan', runId, '--plan-json', PLAN_FIXTURE], h.baseUrl, f.organizationToken);
    await eventually(async () => (waiting.output().includes('waits for an override') ? true : undefined), 30_000, 100);
    const stages = await api(h, 'get', `/runs/${runId}/task-stages`, f.organizationToken);
    const stageId = (stages.body.data as { id: string; attributes: { stage: string } }[]).find(
      (item) => item.attributes.stage === 'post_plan',
    )?.id;
    const overridden = await api(h, 'post', `/task-stages/${stageId}/actions/override`, f.organizationToken, { comment: 'accepted risk' });
    expect(overridden.status).toBe(200);
    const result = await waiting.done;
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`run ${runId} is post_plan_completed: go on`);

    // The pipeline's step retried after the override: the plan is in, so it follows the run and goes on.
    const again = await cli(['run', 'plan', runId, '--plan-json', PLAN_FIXTURE], f.organizationToken);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('was reported already');
  }, 90_000);

  it('reports failed Terraform steps: a plan that errored ends the run, exit 6', async () => {
    const f = await seedOrganization(h, uniqueName('cli-errored'));
    const ws = await localWorkspace(h, f, [{ name: 'check', result: 'passed', enforcement: 'mandatory', stages: ['post_plan'] }], servers);
    const { runId } = await start(f, ws.name);
    const result = await cli(['run', 'plan', runId, '--errored', 'terraform plan failed: exit status 1'], f.organizationToken);
    expect(result.code).toBe(6);
    expect(result.stdout).toContain(`run ${runId}: stopped: run errored`);
    const plan = await api(h, 'get', `/runs/${runId}/plan`, f.organizationToken);
    expect(plan.body.data.attributes).toMatchObject({ status: 'errored', 'error-message': 'terraform plan failed: exit status 1' });
  }, 60_000);

  describe('one-line errors with their own exit codes', () => {
    let f: Fixture;
    let workspace: string;
    let planningRun: string;
    let wrongService: Server;
    let readOnlyToken: string;

    beforeAll(async () => {
      f = await seedOrganization(h, uniqueName('cli-errors'));
      const created = await localWorkspace(h, f, [], servers);
      workspace = created.name;
      const readers = await createTeam(h, f.organization, f.organizationToken, 'readers');
      await grantWorkspace(h, f.organizationToken, readers, created.id, { access: 'read' });
      readOnlyToken = await createTeamToken(h, f.organizationToken, readers);
      planningRun = (await start(f, workspace)).runId;
      // Something else listening where the service should be.
      wrongService = createServer((_, res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>'));
      await new Promise<void>((resolve) => wrongService.listen(0, '127.0.0.1', resolve));
    });
    afterAll(() => new Promise<void>((resolve) => wrongService.close(() => resolve())));

    it('a service that is not there: exit 4', async () => {
      const port = await freePort();
      const closed = await runCli(['run', 'watch', planningRun], `http://127.0.0.1:${port}`, f.organizationToken);
      expectOneLineError(
        closed,
        4,
        new RegExp(`^runtasks: cannot reach the service at http://127\\.0\\.0\\.1:${port}: connection refused\n$`),
      );
      const other = await runCli(
        ['run', 'watch', planningRun],
        `http://127.0.0.1:${(wrongService.address() as AddressInfo).port}`,
        f.organizationToken,
      );
      expectOneLineError(other, 4, /does not look like the Run Tasks service \(GET \/api\/v2\/ping answered 404\): check RUNTASKS_ADDRESS/);
    });

    it('a bad token: exit 3', async () => {
      expectOneLineError(await cli(['run', 'watch', planningRun], 'not-a-token'), 3, /the service refused the token \(401\)/);
    });

    it('an unknown workspace or run: exit 5', async () => {
      const ws = await cli(['run', 'start', '--workspace', `${f.organization}/nope`, '--config-dir', config()], f.organizationToken);
      expectOneLineError(ws, 5, new RegExp(`unknown workspace ${f.organization}/nope \\(or the token cannot see it\\)`));
      expectOneLineError(await cli(['run', 'watch', 'run-doesnotexist1'], f.organizationToken), 5, /unknown run run-doesnotexist1/);
    });

    it('a run in the wrong status: exit 5, nothing changed', async () => {
      const result = await cli(['run', 'applied', planningRun], f.organizationToken);
      expectOneLineError(result, 5, new RegExp(`run ${planningRun} is planning: its apply can be reported only while it is applying`));
      expect(await statusOf(f, planningRun)).toBe('planning');
    });

    it('a run of a remote workspace: exit 5, nothing to report', async () => {
      const runId = await createRun(h, f.organizationToken, f.workspaceId);
      const result = await cli(['run', 'plan', runId, '--plan-json', PLAN_FIXTURE], f.organizationToken);
      expectOneLineError(result, 5, new RegExp(`run ${runId} is on a workspace with execution-mode remote`));
    });

    it('a token that may only read: exit 5, nothing changed', async () => {
      const result = await cli(['run', 'plan', planningRun, '--plan-json', PLAN_FIXTURE], readOnlyToken);
      expectOneLineError(result, 5, new RegExp(`unknown run ${planningRun}, or the token may not plan on its workspace`));
      expect(await statusOf(f, planningRun)).toBe('planning');
    });

    it('a malformed, a wrong or an oversized plan file: exit 2 before sending, or 5 from the service; the run unchanged', async () => {
      const dir = tempDir();
      writeFileSync(join(dir, 'broken.json'), '{"format_version": "1.2", ');
      writeFileSync(join(dir, 'state.json'), JSON.stringify({ values: {} }));
      writeFileSync(join(dir, 'bad-changes.json'), JSON.stringify({ format_version: '1.2', resource_changes: 'none' }));
      const big = JSON.parse(readFileSync(PLAN_FIXTURE, 'utf8'));
      big.variables = { padding: { value: 'x'.repeat(PLAN_JSON_MAX_BYTES) } };
      writeFileSync(join(dir, 'big.json'), JSON.stringify(big));
      const plan = (file: string) => cli(['run', 'plan', planningRun, '--plan-json', join(dir, file)], f.organizationToken);

      expectOneLineError(await plan('missing.json'), 2, /cannot read the plan file/);
      expectOneLineError(await plan('broken.json'), 2, /broken\.json is not JSON: give the output of `terraform show -json PLANFILE`/);
      expectOneLineError(await plan('state.json'), 2, /state\.json is not a Terraform plan \(no format_version\)/);
      expectOneLineError(
        await plan('bad-changes.json'),
        5,
        /the service refused the plan file .*bad-changes\.json: invalid plan: .*\(at \/resource_changes\)/,
      );
      expectOneLineError(await plan('big.json'), 5, /big\.json \(\d+ bytes\) is larger than the service accepts \(413\)/);
      expect(await statusOf(f, planningRun)).toBe('planning');
    });

    it('--output json is one JSON document on stdout for errors too', async () => {
      const result = await cli(['run', 'watch', planningRun, '--output', 'json'], 'not-a-token');
      expect(result.code).toBe(3);
      expect(JSON.parse(result.stdout)).toEqual({
        command: 'watch',
        error: { kind: 'auth', message: expect.stringContaining('401') },
        'exit-code': 3,
      });
    });
  });
});
