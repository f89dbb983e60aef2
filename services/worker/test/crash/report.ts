import { afterAll, afterEach } from '@jest/globals';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { runCleanups } from '../../../../test/support/cluster.ts';

/**
 * The counts of every crash scenario end up in test-results/crash-report.<name>.json, one file per test
 * file (they may run at once), written after each scenario and again at the end.
 */
export function useCrashReport(name: string) {
  const file = new URL(`../../../../test-results/crash-report.${name}.json`, import.meta.url).pathname;
  const startedAt = Date.now();
  const report: { generatedAt?: string; durationMs?: number; scenarios: Record<string, Record<string, unknown>> } = { scenarios: {} };
  async function writeReport(): Promise<void> {
    report.generatedAt = new Date().toISOString();
    report.durationMs = Date.now() - startedAt;
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  }

  afterEach(runCleanups, 120_000);
  afterAll(async () => {
    await runCleanups();
    await writeReport();
  }, 120_000);
  return { report, writeReport };
}
