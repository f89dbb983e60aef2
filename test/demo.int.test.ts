import { afterAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { databaseUrl, dropDatabase, PREFIX, withAdminClient } from './support/databases.ts';

/**
 * `npm run demo` as a user runs it on CI: no TTY, CI=true. It must end by itself with exit code 0,
 * having shown the run reach its final status, both tasks' results and where to look, and leave no
 * process listening and no queue keys behind.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DATABASE = `${PREFIX}_demo`;
const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0';

describe('npm run demo', () => {
  let child: ChildProcess | undefined;

  /** Runs the demo as CI would, with no TTY, and collects everything it prints until it exits. */
  async function runDemo(...args: string[]): Promise<{ code: number | null; output: string }> {
    let output = '';
    const demo = spawn(process.execPath, ['scripts/demo.ts', ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env['PATH'] ?? '',
        CI: 'true',
        DATABASE_URL: databaseUrl(DATABASE),
        DEMO_DATABASE: DATABASE,
        REDIS_URL,
        DEMO_TIMEOUT_SECONDS: '60',
      },
    });
    child = demo;
    demo.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    demo.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => demo.once('exit', (exitCode) => resolve(exitCode)));
    return { code, output };
  }

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await withAdminClient((client) => dropDatabase(client, DATABASE));
  });

  it('shows a run with a passing mandatory and a failing advisory task to the end, then exits 0 by itself', async () => {
    const { code, output } = await runDemo();

    expect({ code, output }).toMatchObject({ code: 0 });
    // Plain lines only: no redraws or colours without a TTY.
    expect(output).not.toContain('\x1b[');
    // The timeline and the summary name the final status.
    expect(output).toMatch(/^\s+\S+\s+\+\d+\.\d\ds\s+run\s+(applied|post_apply_completed)$/m);
    expect(output).toMatch(/run run-\w+: (applied|post_apply_completed) after/);
    expect(output).toContain('has-task-warnings: true');
    // Both tasks' results, with their messages and outcome counts.
    expect(output).toMatch(/post_plan\s+demo-passing\s+mandatory\s+passed\s+1 outcome\s+Example check passed/);
    expect(output).toMatch(/post_plan\s+demo-failing\s+advisory\s+failed\s+1 outcome\s+Example check failed/);
    expect(output).toMatch(/pre_plan\s+demo-passing\s+mandatory\s+passed/);
    // Where to look.
    expect(output).toMatch(/dashboard\s+http:\/\/127\.0\.0\.1:\d+\/admin\/queues/);
    expect(output).toMatch(/\/api\/v2\/runs\/run-\w+\?include=task_stages/);
    expect(output).toContain('Demo finished: everything stopped.');

    // Everything stopped: the service no longer listens and the run's queue keys are gone.
    const baseUrl = /service\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1];
    expect(baseUrl).toBeDefined();
    const after = await fetch(`${baseUrl}/api/v2/ping`).then(
      (res) => res.status,
      () => 'refused',
    );
    expect(after).toBe('refused');
    const prefix = /queue prefix (runtasks-demo-[0-9a-f]+)/.exec(output)?.[1];
    expect(prefix).toBeDefined();
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      expect(await redis.keys(`${prefix}:*`)).toEqual([]);
    } finally {
      redis.disconnect();
    }
  }, 90_000);

  it('--local: a pipeline drives the run through every stage with the runtasks CLI, then exits 0 by itself', async () => {
    const { code, output } = await runDemo('--local');

    expect({ code, output }).toMatchObject({ code: 0 });
    expect(output).not.toContain('\x1b[');
    // The pipeline's five steps, each through the CLI, each exiting 0.
    for (const step of ['run start --workspace demo/network', 'run plan run-', 'run apply run-', 'run applied run-']) {
      expect(output).toMatch(new RegExp(`pipeline\\s+\\$ runtasks ${step.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    }
    expect(output.match(/pipeline\s+exit 0$/gm)).toHaveLength(4);
    expect(output).not.toMatch(/pipeline\s+exit [1-9]/);
    // The run waited for the pipeline's reports, the tasks read the reported plan at every stage after it.
    expect(output).toMatch(/^\s+\S+\s+\+\d+\.\d\ds\s+run\s+planning$/m);
    expect(output).toContain('plan: 3 to add, 1 to change, 2 to destroy');
    expect(output).toMatch(/run run-\w+: post_apply_completed after/);
    for (const stage of ['post_plan', 'pre_apply', 'post_apply']) {
      expect(output).toMatch(
        new RegExp(`${stage}\\s+demo-passing\\s+mandatory\\s+passed\\s+1 outcome\\s+Example check passed: 5 resource changes reviewed`),
      );
    }
    expect(output).toMatch(/warning: post_plan demo-failing \(advisory\): failed/);
    expect(output).toContain('Demo finished: everything stopped.');
  }, 90_000);
});
