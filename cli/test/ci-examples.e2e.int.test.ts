import { describe, expect, it } from '@jest/globals';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, seedOrganization, uniqueName, type Fixture } from '../../test/support/fixtures.ts';
import { EXAMPLE, loadGitlabPipeline, pushToMain, runGithubJob, runGitlabJob, type RunningShell } from './support/ci-runners.ts';
import { localWorkspace, PLAN_FIXTURE, runCli, type TaskSpec } from './support/cli-harness.ts';
import { useCliService } from './support/e2e-setup.ts';

/**
 * Both CI examples carried out step by step in a shell, as their runners would: the CLI fetched from the
 * service and checked against its SHA-256 (the composite action, the GitLab template), the stand-in
 * terraform, and the service and a worker of this process, through what a pipeline meets in its first
 * weeks: a step retried, the service restarted while a step waits, a job cancelled while it waits.
 */
describe('the CI examples, carried out step by step', () => {
  const g = useCliService();
  const { servers, statusOf } = g;

  /** A checkout of a repository with its Terraform configuration in infra/. */
  function checkout(): string {
    const dir = mkdtempSync(join(tmpdir(), 'runtasks-ci-'));
    g.dirs.push(dir);
    mkdirSync(join(dir, 'infra'));
    writeFileSync(join(dir, 'infra/main.tf'), 'resource "null_resource" "example" {}\n');
    return dir;
  }

  async function cliPin(): Promise<string> {
    return (await (await fetch(`${g.h.baseUrl}/cli/runtasks.mjs.sha256`)).text()).split(' ')[0] ?? '';
  }

  /**
   * Stops the API and starts it again on the same port once the waiting step has said it lost the
   * service, as a restart the step notices does. Down for a fixed time instead, the step could poll
   * (every 2 s) on both sides of the gap and never see it.
   */
  async function restartApi(running: RunningShell): Promise<void> {
    const server: Server = g.h.server;
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    await waitFor(running, /runtasks: lost the service at /);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  }

  const waitFor = (running: RunningShell, text: string | RegExp): Promise<true> =>
    eventually(async () => (running.output().match(text) ? true : undefined), 60_000, 100);

  async function workspace(name: string, specs: TaskSpec[]): Promise<{ f: Fixture; ws: string }> {
    const f = await seedOrganization(g.h, uniqueName(name));
    const created = await localWorkspace(g.h, f, specs, servers);
    return { f, ws: created.name };
  }

  const githubOptions = (f: Fixture, ws: string, dir: string) =>
    pushToMain({ baseUrl: g.h.baseUrl, token: f.organizationToken, workspace: `${f.organization}/${ws}` }, dir, PLAN_FIXTURE);

  it('GitHub Actions: a push plans and applies through every stage, across a service restart and a retried report', async () => {
    const { f, ws } = await workspace('gh-flow', [
      // A slow pre_plan task: the restart happens while `run start` waits for it.
      { name: 'slow-check', result: 'passed', enforcement: 'mandatory', stages: ['pre_plan'], callbackDelayMs: 4000 },
      { name: 'pipeline-check', result: 'passed', enforcement: 'mandatory', stages: ['post_plan', 'pre_apply', 'post_apply'] },
      { name: 'cost-advisor', result: 'failed', enforcement: 'advisory', stages: ['post_plan'] },
    ]);
    const dir = checkout();
    const steps = await runGithubJob(EXAMPLE('github-actions.yml'), {
      ...(await githubOptions(f, ws, dir)),
      twice: ['Report the plan (post_plan tasks)'],
      onStep: async (name, running) => {
        if (name !== 'Start the run (pre_plan tasks)') return;
        await waitFor(running, /run run-\w+ created/);
        await restartApi(running);
      },
    });
    const outcome = Object.fromEntries(steps.map((step) => [step.name, step.outcome]));
    // A failed step's log is in the comparison, so that a failure shows why.
    const failures = steps.filter((step) => step.outcome === 'failure').map((step) => `${step.name}: ${step.output}`);
    expect({ outcome, failures }).toEqual({
      failures: [],
      outcome: {
        'Install the runtasks CLI': 'success',
        'Start the run (pre_plan tasks)': 'success',
        'terraform init -input=false': 'success',
        'terraform plan': 'success',
        'Report the plan (post_plan tasks)': 'success',
        'Confirm the run (pre_apply tasks)': 'success',
        'terraform apply': 'success',
        'Report the apply (post_apply tasks)': 'success',
        'End the run': 'skipped',
      },
    });
    const start = steps.find((step) => step.name === 'Start the run (pre_plan tasks)')?.output ?? '';
    expect(start).toMatch(/runtasks: lost the service at .* \(connection (refused|closed)\); run run-\w+ goes on there; retrying until/);
    expect(start).toMatch(/runtasks: the service at .* answers again \(after \d+ s\)/);
    const report = steps.find((step) => step.name === 'Report the plan (post_plan tasks)')?.output ?? '';
    // The step ran twice: the second report is the same plan, so it follows the run.
    expect(report).toMatch(/the plan of run run-\w+ was reported already \(the same plan, sha256 [0-9a-f]{12}\); following the run/);
    expect(report).toMatch(/^::warning title=post_plan cost-advisor \(advisory\)%3A failed::/m);
    // Every step's verdict line names the run's page.
    const runId = /run (run-\w+) created/.exec(start)?.[1] ?? '';
    const page = `${g.h.baseUrl}/app/${f.organization}/workspaces/${ws}/runs/${runId}`;
    for (const step of steps.filter((item) => /^(Start|Report|Confirm)/.test(item.name))) {
      expect(step.output).toContain(`runtasks: go on: run ${runId} is `);
      expect(step.output).toContain(page);
    }
    expect(await statusOf(f, runId)).toBe('post_apply_completed');
    // The CLI wrote the job summary by itself: each step's verdict, the plan's counts, each stage.
    const summary = readFileSync(join(dir, '.runner-temp/summary.md'), 'utf8');
    expect(summary).toContain(`Run [${runId}](${page}) is \`post_plan_completed\`. **Verdict: go on.**`);
    expect(summary).toContain('Plan: 3 to add, 1 to change, 2 to destroy.');
    expect(summary).toContain('#### post_plan: passed (1 failed task only warns)');
    expect(summary).toContain('#### post_apply: passed');
  }, 180_000);

  it('GitHub Actions: a job cancelled while it waits ends its run, and the next run does not queue behind it', async () => {
    const { f, ws } = await workspace('gh-cancel', [
      { name: 'forever', result: 'passed', enforcement: 'mandatory', stages: ['post_plan'], callbackDelayMs: 600_000 },
    ]);
    const dir = checkout();
    const steps = await runGithubJob(EXAMPLE('github-actions.yml'), {
      ...(await githubOptions(f, ws, dir)),
      onStep: async (name, running, job) => {
        if (name !== 'Report the plan (post_plan tasks)') return;
        await waitFor(running, /plan reported/);
        job.cancel();
      },
    });
    const outcome = Object.fromEntries(steps.map((step) => [step.name, step.outcome]));
    expect(outcome).toMatchObject({
      'Report the plan (post_plan tasks)': 'cancelled',
      'Confirm the run (pre_apply tasks)': 'skipped',
      'End the run': 'success',
    });
    const runId = /run (run-\w+) created/.exec(steps.find((step) => step.name.startsWith('Start'))?.output ?? '')?.[1] ?? '';
    expect(await statusOf(f, runId)).toBe('canceled');
    expect(steps.at(-1)?.output).toContain(`runtasks: ended: run ${runId} is canceled`);
    // The workspace is free: the next pipeline's run starts at once.
    const next = await runCli(
      ['run', 'start', '--workspace', `${f.organization}/${ws}`, '--config-dir', join(dir, 'infra')],
      g.h.baseUrl,
      f.organizationToken,
    );
    expect(next.code).toBe(0);
    expect(next.stderr).toMatch(/runtasks: go on: run run-\w+ is planning/);
  }, 120_000);

  describe('GitLab CI', () => {
    const pipeline = loadGitlabPipeline(EXAMPLE('gitlab-ci.yml'));
    const variables = async (f: Fixture, ws: string, job: number) => ({
      RUNTASKS_ADDRESS: g.h.baseUrl,
      RUNTASKS_TOKEN: f.organizationToken,
      RUNTASKS_WORKSPACE: `${f.organization}/${ws}`,
      RUNTASKS_CLI_SHA256: await cliPin(),
      STANDIN_TERRAFORM_PLAN_JSON: PLAN_FIXTURE,
      CI_SERVER_HOST: 'gitlab.example.com',
      CI_JOB_ID: String(job),
      CI_JOB_URL: `https://gitlab.example.com/acme/infra/-/jobs/${job}`,
      CI_PIPELINE_URL: 'https://gitlab.example.com/acme/infra/-/pipelines/7',
      CI_COMMIT_BRANCH: 'main',
      CI_DEFAULT_BRANCH: 'main',
      CI_PIPELINE_SOURCE: 'push',
      PLAN_ONLY: '',
    });

    it('the default branch plans, then the manual apply job applies, with a service restart while it waits', async () => {
      const { f, ws } = await workspace('gl-flow', [
        { name: 'pipeline-check', result: 'passed', enforcement: 'mandatory', stages: ['pre_plan', 'post_plan'] },
        { name: 'slow-apply-check', result: 'passed', enforcement: 'mandatory', stages: ['pre_apply'], callbackDelayMs: 4000 },
      ]);
      const dir = checkout();
      const plan = await runGitlabJob(pipeline, 'plan', { projectDir: dir, variables: await variables(f, ws, 101) });
      expect({ status: plan.status, output: plan.output }).toMatchObject({ status: 'success' });
      expect(plan.dotenv).toEqual({ RUN_ID: expect.stringMatching(/^run-\w+$/), HAS_CHANGES: 'true' });
      const apply = await runGitlabJob(pipeline, 'apply', {
        projectDir: dir,
        variables: { ...(await variables(f, ws, 102)), ...plan.dotenv },
        onStart: async (running) => {
          await waitFor(running, /apply confirmed/);
          await restartApi(running);
        },
      });
      expect({ status: apply.status, output: apply.output }).toMatchObject({ status: 'success' });
      expect(apply.output).toMatch(/runtasks: the service at .* answers again/);
      expect(apply.afterOutput).not.toContain('runtasks');
      // No post_apply tasks: applied is the run's end.
      expect(await statusOf(f, plan.dotenv['RUN_ID'] ?? '')).toBe('applied');
      expect(readFileSync(join(dir, 'runtasks-summary.md'), 'utf8')).toContain('#### pre_apply: passed');
    }, 180_000);

    it('a plan job cancelled while it waits ends its run in after_script; a failed plan leaves end-run nothing to do', async () => {
      const { f, ws } = await workspace('gl-cancel', [
        { name: 'forever', result: 'passed', enforcement: 'mandatory', stages: ['post_plan'], callbackDelayMs: 600_000 },
      ]);
      const dir = checkout();
      const plan = await runGitlabJob(pipeline, 'plan', {
        projectDir: dir,
        variables: await variables(f, ws, 201),
        onStart: async (running, job) => {
          await waitFor(running, /plan reported/);
          job.cancel();
        },
      });
      expect(plan.status).toBe('canceled');
      const runId = plan.dotenv['RUN_ID'] ?? '';
      expect(plan.afterOutput).toContain(`runtasks: ended: run ${runId} is canceled`);
      expect(await statusOf(f, runId)).toBe('canceled');

      // Terraform fails: the run errors with Terraform's message, and end-run (when: on_failure) finds it ended.
      const failing = checkout();
      const failed = await runGitlabJob(pipeline, 'plan', {
        projectDir: failing,
        variables: { ...(await variables(f, ws, 202)), STANDIN_TERRAFORM_FAIL: 'plan' },
      });
      expect(failed.status).toBe('failed');
      expect(failed.output).toMatch(
        /runtasks: stopped: run run-\w+: run errored - the plan: terraform plan failed in https:\/\/gitlab\.example\.com\/acme\/infra\/-\/jobs\/202/,
      );
      const endRun = await runGitlabJob(pipeline, 'end-run', {
        projectDir: failing,
        variables: { ...(await variables(f, ws, 203)), ...failed.dotenv },
      });
      expect(endRun.status).toBe('success');
      expect(endRun.output).toMatch(/run run-\w+ is errored: nothing to cancel/);
    }, 120_000);
  });
});
