import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { join } from 'node:path';
import {
  createRun,
  createTeam,
  createTeamToken,
  type Fixture,
  grantWorkspace,
  seedOrganization,
  uniqueName,
} from '../../test/support/fixtures.ts';
import { freePort } from '../../test/support/processes.ts';
import { localWorkspace, PLAN_FIXTURE, runCli } from './support/cli-harness.ts';
import { PLAN_JSON_MAX_BYTES } from './support/e2e-constants.ts';
import { useCliService } from './support/e2e-setup.ts';

/**
 * The CLI end to end: the API and a worker in this process on a fresh database, example run task servers
 * on loopback, and the real `runtasks` bin spawned with Node as a CI job runs it, driving `local`
 * workspaces' runs through every stage. A small PLAN_JSON_MAX_BYTES makes the size limit cheap to reach.
 */
describe('runtasks against the real service', () => {
  const g = useCliService();
  const { servers, cli, tempDir, config, statusOf, start, expectOneLineError } = g;

  describe('one-line errors with their own exit codes', () => {
    let f: Fixture;
    let workspace: string;
    let planningRun: string;
    let wrongService: Server;
    let readOnlyToken: string;

    beforeAll(async () => {
      f = await seedOrganization(g.h, uniqueName('cli-errors'));
      const created = await localWorkspace(g.h, f, [], servers);
      workspace = created.name;
      const readers = await createTeam(g.h, f.organization, f.organizationToken, 'readers');
      await grantWorkspace(g.h, f.organizationToken, readers, created.id, { access: 'read' });
      readOnlyToken = await createTeamToken(g.h, f.organizationToken, readers);
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
      const runId = await createRun(g.h, f.organizationToken, f.workspaceId);
      const result = await cli(['run', 'plan', runId, '--plan-json', PLAN_FIXTURE], f.organizationToken);
      expectOneLineError(result, 5, new RegExp(`run ${runId} is on a workspace with execution-mode remote`));
    });

    it('a token that may only read: exit 5, nothing changed', async () => {
      const result = await cli(['run', 'plan', planningRun, '--plan-json', PLAN_FIXTURE], readOnlyToken);
      // It reads the run, so the service says which permission the report takes (403), rather than hiding the run.
      expectOneLineError(
        result,
        5,
        new RegExp(`/runs/${planningRun}/plan/json-output was refused \\(403\\): .*may not report the run's plan: that takes`),
      );
      expect(await statusOf(f, planningRun)).toBe('planning');
    });

    it('a malformed, a wrong or an oversized plan file: exit 2 before sending, or 5 from the service; the run unchanged', async () => {
      const dir = tempDir();
      writeFileSync(join(dir, 'broken.json'), '{"format_version": "1.2", ');
      writeFileSync(join(dir, 'state.json'), JSON.stringify({ values: {} }));
      // What `terraform show -json` prints without a plan file: the state.
      writeFileSync(
        join(dir, 'real-state.json'),
        JSON.stringify({ format_version: '1.0', terraform_version: '1.9.5', values: { root_module: {} } }),
      );
      writeFileSync(join(dir, 'tfplan'), Buffer.from('PK\u0003\u0004binary plan'));
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
      expectOneLineError(
        await plan('big.json'),
        5,
        /big\.json \(\d+ bytes\) is larger than the service takes \(65536 bytes, its PLAN_JSON_MAX_BYTES\): ask its operator to raise PLAN_JSON_MAX_BYTES \(413\)/,
      );
      expectOneLineError(await plan('real-state.json'), 2, /real-state\.json is a Terraform state, not a plan/);
      expectOneLineError(await plan('tfplan'), 2, /tfplan is a binary plan file \(terraform plan -out\), not its JSON/);
      expect(await statusOf(f, planningRun)).toBe('planning');
    }, 90_000);

    it('--output json is one JSON document on stdout for errors too', async () => {
      const result = await cli(['run', 'watch', planningRun, '--output', 'json'], 'not-a-token');
      expect(result.code).toBe(3);
      expect(JSON.parse(result.stdout)).toEqual({
        command: 'watch',
        run: { id: planningRun },
        error: { kind: 'auth', message: expect.stringContaining('401') },
        'exit-code': 3,
      });
    });
  });
});
