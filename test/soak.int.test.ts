import { afterAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PREFIX, SERVER_URL, withAdminClient } from './support/databases.ts';
import { RESILIENCE_REPORT_DIR, type SuiteFigures } from './support/figures.ts';

/**
 * A short soak (scripts/soak.ts): two minutes of mixed load on two API and three
 * worker processes with a fault every 20 s (worker kill -9, API kill -9, worker SIGSTOP past the lock
 * duration, PostgreSQL terminating every service connection), then the invariants. Two minutes only catch a
 * gross leak, so growth is allowed up to 50 % here; `npm run soak` runs 30 minutes and holds it to 10 %.
 */
const DATABASE = `${PREFIX}_soak`;
const LABEL = 'short';

afterAll(async () => {
  await withAdminClient((client) => client.query(`drop database if exists "${DATABASE}" with (force)`));
});

describe('soak', () => {
  it('two minutes of mixed load with a fault every 20 s: nothing lost, stuck or broken, no gross growth', async () => {
    const output: string[] = [];
    const exitCode = await new Promise<number | null>((resolve) => {
      const child = spawn(
        process.execPath,
        [
          'scripts/soak.ts',
          '--minutes',
          '2',
          '--rate',
          '3',
          '--fault-every',
          '20',
          '--max-growth',
          '0.5',
          '--sample-every',
          '2',
          '--label',
          LABEL,
        ],
        {
          env: { ...process.env, BENCH_DATABASE: DATABASE, BENCH_POSTGRES_URL: SERVER_URL, RESILIENCE_REPORT_DIR },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      const keep = (chunk: Buffer): void => void output.push(chunk.toString());
      child.stdout.on('data', keep);
      child.stderr.on('data', keep);
      child.once('exit', resolve);
    });
    const report = output.join('').slice(-6000);
    expect({ exitCode, report: exitCode === 0 ? '' : report }).toEqual({ exitCode: 0, report: '' });

    const figures = (JSON.parse(readFileSync(join(RESILIENCE_REPORT_DIR, 'soak.json'), 'utf8')) as SuiteFigures).scenarios[LABEL];
    expect(figures).toMatchObject({ lost: 0, stuck: 0, invariantViolations: 0, serverErrors: 0, unexpectedExits: 0 });
    // Every fault of the rotation happened at least once, and the load was real.
    expect(Object.keys((figures?.['faultsInjected'] ?? {}) as Record<string, number>).sort()).toEqual([
      'api kill -9',
      'postgres terminate backends',
      'worker SIGSTOP',
      'worker kill -9',
    ]);
    expect(Number(figures?.['runsAnswered201'])).toBeGreaterThan(200);
    expect(Number(figures?.['samples'])).toBeGreaterThan(20);
  }, 330_000);
});
