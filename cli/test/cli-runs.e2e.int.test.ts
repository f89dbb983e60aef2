import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  api,
  createOrganization,
  createOrganizationToken,
  eventually,
  type Fixture,
  seedOrganization,
  uniqueName,
} from '../../test/support/fixtures.ts';
import { type CliRun, localWorkspace, PLAN_FIXTURE, PLAN_FIXTURE_COUNTS, startCli } from './support/cli-harness.ts';
import { ALL, E2E_GOLDEN } from './support/e2e-constants.ts';
import { useCliService } from './support/e2e-setup.ts';

/**
 * The CLI end to end: the API and a worker in this process on a fresh database, example run task servers
 * on loopback, and the real `runtasks` bin spawned with Node as a CI job runs it, driving `local`
 * workspaces' runs through every stage. A small PLAN_JSON_MAX_BYTES makes the size limit cheap to reach.
 */
describe('runtasks against the real service', () => {
  const g = useCliService();
  const { servers, cli, tempDir, config, runOf, statusOf, start } = g;

  it('drives a local run through every stage: start, plan, apply, applied, with the plan read by the tasks', async () => {
    const f = await seedOrganization(g.h, uniqueName('cli-flow'));
    const ws = await localWorkspace(
      g.h,
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
    const archive = await fetch(`${g.h.baseUrl}/api/v2/configuration-versions/${cv}/download`, {
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
    // stderr holds the one verdict line: the verdict, and the run's page.
    const page = `${g.h.baseUrl}/app/${f.organization}/workspaces/${ws.name}/runs/${runId}`;
    expect({ code: planned.code, stderr: planned.stderr }).toEqual({
      code: 0,
      stderr: `runtasks: go on: run ${runId} is post_plan_completed ${page}\n`,
    });
    // Plain lines in CI: each result, the advisory failure as a warning, the plan's counts, the verdict.
    expect(planned.stdout).not.toContain('\x1b[');
    expect(planned.stdout).toMatch(
      /^ {2}post_plan pipeline-check \(mandatory\): passed - Example check passed: 5 resource changes reviewed\./m,
    );
    expect(planned.stdout).toMatch(/^warning: post_plan cost-advisor \(advisory\): failed \(advisory: warns only\)/m);
    expect(planned.stdout).toContain('plan: 3 to add, 1 to change, 2 to destroy');
    // The summary, with the run's and results' ids and the address made stable, is the golden file.
    const normalized = readFileSync(summary, 'utf8')
      .replaceAll(g.h.baseUrl, 'http://runtasks.test')
      .replaceAll(runId, 'run-E2E')
      .replace(/taskrs-\w+/g, 'taskrs-ID')
      .replaceAll(`/app/${f.organization}/workspaces/${ws.name}/`, '/app/acme/workspaces/network/');
    expect(normalized).toBe(readFileSync(E2E_GOLDEN, 'utf8'));

    const plan = await api(g.h, 'get', `/runs/${runId}/plan`, f.organizationToken);
    expect(plan.body.data.attributes).toMatchObject({ status: 'finished', 'has-changes': true, ...PLAN_FIXTURE_COUNTS });

    const applied = await cli(['run', 'apply', runId], f.organizationToken);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toMatch(/pre_apply pipeline-check \(mandatory\): passed/);
    expect(applied.stderr).toBe(`runtasks: go on: run ${runId} is applying ${page}\n`);

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
      const f = await seedOrganization(g.h, uniqueName(`cli-block-${stage}`));
      const ws = await localWorkspace(g.h, f, [{ name: 'gate', result: 'failed', enforcement: 'mandatory', stages: [stage] }], servers);
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
      // The verdict line says which task, with its message.
      expect(last.stderr.trimEnd().split('\n').at(-1)).toMatch(
        new RegExp(
          `^runtasks: blocked: run ${runId}: run errored: ${stage} blocked by mandatory task gate - gate: Example check failed: .+ http://\\S+/runs/${runId}$`,
        ),
      );
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
      const organization = await createOrganization(g.h, uniqueName(`cli-hold-${stage}`), { 'task-overrides-enabled': true });
      const f: Fixture = { organization, organizationToken: await createOrganizationToken(g.h, organization), workspaceId: '', teamId: '' };
      const ws = await localWorkspace(g.h, f, [{ name: 'gate', result: 'failed', enforcement: 'mandatory', stages: [stage] }], servers);
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
      expect(last.stderr).toContain(`${stage} blocked by a mandatory task: the run waits for an override - gate: Example check failed`);
      expect(await statusOf(f, runId)).toBe(`${stage}_awaiting_decision`);
    },
    90_000,
  );

  it('waits for an override where the organization allows one, then `run plan` goes on and exits 0', async () => {
    const organization = await createOrganization(g.h, uniqueName('cli-override'), { 'task-overrides-enabled': true });
    const f: Fixture = { organization, organizationToken: await createOrganizationToken(g.h, organization), workspaceId: '', teamId: '' };
    const ws = await localWorkspace(g.h, f, [{ name: 'gate', result: 'failed', enforcement: 'mandatory', stages: ['post_plan'] }], servers);

    // Without waiting: exit 1 at once, the run still waits for a person.
    const first = await start(f, ws.name);
    const impatient = await cli(['run', 'plan', first.runId, '--plan-json', PLAN_FIXTURE, '--no-wait-override'], f.organizationToken);
    expect(impatient.code).toBe(1);
    expect(impatient.stderr).toContain('waits for an override');
    expect(await statusOf(f, first.runId)).toBe('post_plan_awaiting_decision');
    // A run awaiting a decision holds its workspace: the next run would wait behind it.
    expect((await api(g.h, 'post', `/runs/${first.runId}/actions/discard`, f.organizationToken, {})).status).toBe(202);

    const { runId } = await start(f, ws.name);
    const waiting = startCli(['run', 'plan', runId, '--plan-json', PLAN_FIXTURE], g.h.baseUrl, f.organizationToken);
    await eventually(async () => (waiting.output().includes('waits for an override') ? true : undefined), 30_000, 100);
    const stages = await api(g.h, 'get', `/runs/${runId}/task-stages`, f.organizationToken);
    const stageId = (stages.body.data as { id: string; attributes: { stage: string } }[]).find(
      (item) => item.attributes.stage === 'post_plan',
    )?.id;
    const overridden = await api(g.h, 'post', `/task-stages/${stageId}/actions/override`, f.organizationToken, {
      comment: 'accepted risk',
    });
    expect(overridden.status).toBe(200);
    const result = await waiting.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(`runtasks: go on: run ${runId} is post_plan_completed`);
    // The hint named the stage to override and the run's page.
    expect(result.stdout).toContain(`the run waits for an override of task stage ${stageId} (post_plan)`);
    expect(result.stdout).toContain(`/app/${f.organization}/workspaces/${ws.name}/runs/${runId}`);

    // The pipeline's step retried after the override: the plan is in, so it follows the run and goes on.
    const again = await cli(['run', 'plan', runId, '--plan-json', PLAN_FIXTURE], f.organizationToken);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('was reported already');
  }, 90_000);

  it('reports failed Terraform steps: a plan that errored ends the run, exit 6', async () => {
    const f = await seedOrganization(g.h, uniqueName('cli-errored'));
    const ws = await localWorkspace(
      g.h,
      f,
      [{ name: 'check', result: 'passed', enforcement: 'mandatory', stages: ['post_plan'] }],
      servers,
    );
    const { runId } = await start(f, ws.name);
    const result = await cli(['run', 'plan', runId, '--errored', 'terraform plan failed: exit status 1'], f.organizationToken);
    expect(result.code).toBe(6);
    // The verdict line carries Terraform's message, as the pipeline reported it.
    expect(result.stderr).toMatch(
      new RegExp(`^runtasks: stopped: run ${runId}: run errored - the plan: terraform plan failed: exit status 1 http`),
    );
    const plan = await api(g.h, 'get', `/runs/${runId}/plan`, f.organizationToken);
    expect(plan.body.data.attributes).toMatchObject({ status: 'errored', 'error-message': 'terraform plan failed: exit status 1' });
  }, 60_000);
});
