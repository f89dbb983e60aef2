import { describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { readPlan } from '@runtasks/shared/domain';
import { countPlans, planTable } from '../scripts/count-plans.ts';
import { CORPUS_DIR, corpusText } from './fixtures/plans/corpus.ts';
import { CORPUS, type CorpusPlan } from './fixtures/plans/expected.ts';
import { LARGE_PLAN_FILE } from './fixtures/plans/large-plan.ts';

const SCRIPT = fileURLToPath(new URL('../scripts/count-plans.ts', import.meta.url));

const summaryOf = (plan: CorpusPlan) => ({
  resourceAdditions: plan.additions,
  resourceChanges: plan.changes,
  resourceDestructions: plan.destructions,
  resourceImports: plan.imports,
  hasChanges: plan.hasChanges,
});

describe('the plan corpus, counted by the shared counting rule', () => {
  it('has a line in the table for every plan file, and a file for every line', () => {
    const files = readdirSync(CORPUS_DIR).filter((name) => name.endsWith('.json'));
    expect(CORPUS.filter((plan) => plan.file !== LARGE_PLAN_FILE).map((plan) => plan.file)).toEqual(expect.arrayContaining(files));
    expect(CORPUS.length).toBe(files.length + 1);
    expect(files.length).toBeGreaterThanOrEqual(24);
  });

  it.each(CORPUS.map((plan) => [plan.file, plan] as const))('%s', (_, plan) => {
    expect(readPlan(JSON.parse(corpusText(plan)))).toEqual({ ok: true, summary: summaryOf(plan), errored: plan.errored });
  });

  it('scripts/count-plans.ts counts the directory as the table says', () => {
    const rows = countPlans(CORPUS_DIR);
    const expected = CORPUS.filter((plan) => plan.file !== LARGE_PLAN_FILE).map((plan) => ({
      file: plan.file,
      ok: true,
      format: expect.stringMatching(/^(0\.[12]|1\.[0-2])$/),
      summary: summaryOf(plan),
      errored: plan.errored,
    }));
    expect(rows).toEqual(expect.arrayContaining(expected));
    expect(rows).toHaveLength(expected.length);
    // Every format_version Terraform has written since 0.12.
    expect(new Set(rows.map((row) => row.format))).toEqual(new Set(['0.1', '0.2', '1.0', '1.1', '1.2']));
  });

  it('the command prints the table and exits 1 where a file is no plan', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'count-plans-'));
    try {
      copyFileSync(join(CORPUS_DIR, 'tf1.9-mixed-modules.json'), join(dir, 'mixed.json'));
      writeFileSync(join(dir, 'state.json'), JSON.stringify({ format_version: '1.0', values: { root_module: {} } }));
      writeFileSync(join(dir, 'wrapper.json'), '[command]/usr/bin/terraform-bin show -json tfplan\n{}\n::set-output name=exitcode::0\n');
      writeFileSync(join(dir, 'notes.txt'), 'not read');
      const run = promisify(execFile)(process.execPath, [SCRIPT, dir]);
      await expect(run).rejects.toMatchObject({ code: 1 });
      const { stdout } = (await run.catch((error: { stdout: string }) => error)) as { stdout: string };
      const lines = stdout.trimEnd().split('\n');
      expect(lines[0]).toBe('file\tformat\tadditions\tchanges\tdestructions\timports\thas-changes');
      expect(lines[1]).toBe('mixed.json\t1.2\t2\t1\t3\t1\ttrue');
      expect(lines[2]).toMatch(/^state\.json\t1\.0\tnot a plan: \/: None of planned_values/);
      expect(lines[3]).toMatch(
        /^wrapper\.json\t-\tnot a plan: not valid JSON: it holds the output of hashicorp\/setup-terraform's wrapper/,
      );
      expect(lines[4]).toBe('3 files, 1 plans, 2 not plans');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('prints an errored plan as without changes, and says it errored', () => {
    const [errored] = countPlans(CORPUS_DIR).filter((row) => row.file === 'tf1.6-errored.json');
    expect(planTable(errored ? [errored] : [])[1]).toBe('tf1.6-errored.json\t1.2\t1\t0\t0\t0\tfalse (errored)');
  });
});
