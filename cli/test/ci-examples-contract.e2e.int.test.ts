import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { api, eventually, seedOrganization, uniqueName } from '../../test/support/fixtures.ts';
import { EXAMPLE, jobPath, pushToMain, runGithubJob } from './support/ci-runners.ts';
import { localWorkspace, PLAN_FIXTURE } from './support/cli-harness.ts';
import { useCliService } from './support/e2e-setup.ts';

/**
 * The GitHub example through the two cases that need the service's side of issue 44: run creation that
 * honours `Idempotency-Key`, and the plan file's SHA-256 kept on the plan (`plan-file-sha256`). They pass
 * once the service has both.
 */
describe('the GitHub example, with the service keeping idempotency keys and plan file hashes', () => {
  const g = useCliService();

  async function setUp(label: string) {
    const f = await seedOrganization(g.h, uniqueName(label));
    const ws = await localWorkspace(
      g.h,
      f,
      [{ name: 'check', result: 'passed', enforcement: 'mandatory', stages: ['pre_plan', 'post_plan'] }],
      g.servers,
    );
    const dir = mkdtempSync(join(tmpdir(), 'runtasks-ci-contract-'));
    g.dirs.push(dir);
    mkdirSync(join(dir, 'infra'));
    writeFileSync(join(dir, 'infra/main.tf'), 'resource "null_resource" "example" {}\n');
    const options = await pushToMain(
      { baseUrl: g.h.baseUrl, token: f.organizationToken, workspace: `${f.organization}/${ws.name}` },
      dir,
      PLAN_FIXTURE,
    );
    return { f, ws, dir, options };
  }

  it('a retried start step finds the run it created: one run in the workspace', async () => {
    const { f, ws, options } = await setUp('gh-retry-start');
    let tries = 0;
    const steps = await runGithubJob(EXAMPLE('github-actions.yml'), {
      ...options,
      twice: ['Start the run (pre_plan tasks)'],
      onStep: async (name, running, job) => {
        if (name !== 'Start the run (pre_plan tasks)' || ++tries < 2) return;
        // A second run would queue behind the first for an hour: end the job as soon as one is created.
        const created = await eventually(async () => /created (in|by an earlier try)/.exec(running.output())?.[1], 60_000, 100);
        if (created === 'in') job.cancel();
      },
    });
    const start = steps.find((step) => step.name === 'Start the run (pre_plan tasks)')?.output ?? '';
    const runs = await api(g.h, 'get', `/workspaces/${ws.id}/runs`, f.organizationToken);
    expect((runs.body.data as unknown[]).length).toBe(1);
    expect(start).toMatch(
      /run (run-\w+): created by an earlier try of this step \(idempotency key from GITHUB_REPOSITORY=acme\/infra GITHUB_RUN_ID=\d+ GITHUB_RUN_ATTEMPT=1 GITHUB_JOB=terraform\)/,
    );
  }, 180_000);

  it('a plan file replaced after the plan was reported is refused before the run is confirmed', async () => {
    const { f, options } = await setUp('gh-replaced-plan');
    const steps = await runGithubJob(EXAMPLE('github-actions.yml'), {
      ...options,
      // Someone (or a second `terraform plan`) writes another plan file between the report and the apply.
      beforeStep: (name) => {
        if (name !== 'Confirm the run (pre_apply tasks)') return;
        execFileSync('terraform', ['plan', '-input=false', '-out=tfplan'], {
          cwd: join(options.workspace, 'infra'),
          env: { PATH: jobPath(), STANDIN_TERRAFORM_PLAN_JSON: PLAN_FIXTURE },
        });
      },
    });
    const confirm = steps.find((step) => step.name === 'Confirm the run (pre_apply tasks)');
    expect(confirm?.code).toBe(5);
    expect(confirm?.output).toMatch(
      /the plan file tfplan \(sha256 [0-9a-f]{64}\) is not the one whose plan the run's tasks checked \(sha256 [0-9a-f]{64}\)/,
    );
    expect(steps.find((step) => step.name === 'terraform apply')?.outcome).toBe('skipped');
    const runId = /run (run-\w+) created/.exec(steps.find((step) => step.name.startsWith('Start'))?.output ?? '')?.[1] ?? '';
    // Never confirmed; the clean-up step discarded it.
    const run = await api(g.h, 'get', `/runs/${runId}`, f.organizationToken);
    expect(run.body.data.attributes.status).toBe('discarded');
    expect(run.body.data.attributes['status-timestamps']['confirmed-at']).toBeUndefined();
  }, 180_000);
});
