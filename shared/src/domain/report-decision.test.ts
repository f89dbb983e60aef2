import { describe, expect, it } from '@jest/globals';
import { decideReport, type IncomingReport, type ReportedRun } from './report-decision.ts';
import type { RunStatus } from './statuses.ts';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const FILE = 'f'.repeat(64);
const OTHER_FILE = 'e'.repeat(64);
const AT = '2026-11-28T10:00:00.000Z';

const at = (...statuses: string[]): Record<string, string> => Object.fromEntries(statuses.map((status) => [`${status}-at`, AT]));

function run(status: RunStatus, reached: string[], more: Partial<ReportedRun> = {}): ReportedRun {
  return { status, statusTimestamps: at(...reached), executionError: null, planJsonSha256: null, planFileSha256: null, ...more };
}

/** The runs a pipeline can meet, each in the state its reports (or their absence) left it. */
const RUNS = {
  pending: run('pending', []),
  prePlan: run('pre_plan_running', ['pre-plan-running']),
  planning: run('planning', ['planning']),
  planned: run('post_plan_completed', ['planning', 'planned', 'post-plan-completed'], { planJsonSha256: A, planFileSha256: FILE }),
  plannedNoFile: run('planned', ['planning', 'planned'], { planJsonSha256: A }),
  planErrored: run('errored', ['planning', 'errored'], { executionError: 'plan failed' }),
  planJsonErrored: run('errored', ['planning', 'errored'], { planJsonSha256: A, executionError: 'Terraform marked the plan errored' }),
  planTimedOut: run('errored', ['planning', 'errored'], { executionError: 'The pipeline reported no plan within 1800 seconds' }),
  canceledPlanning: run('canceled', ['planning', 'canceled']),
  discarded: run('discarded', ['planning', 'planned', 'discarded'], { planJsonSha256: A }),
  postPlanFailed: run('errored', ['planning', 'planned', 'post-plan-running', 'errored'], { planJsonSha256: A, planFileSha256: FILE }),
  applying: run('applying', ['planning', 'planned', 'applying'], { planJsonSha256: A, planFileSha256: FILE }),
  applyingNoFile: run('applying', ['planning', 'planned', 'applying'], { planJsonSha256: A }),
  applied: run('post_apply_completed', ['planning', 'planned', 'applying', 'applied'], { planJsonSha256: A, planFileSha256: FILE }),
  applyErrored: run('errored', ['planning', 'planned', 'applying', 'errored'], { planJsonSha256: A, executionError: 'apply failed' }),
  canceledApplying: run('canceled', ['planning', 'planned', 'applying', 'canceled'], { planJsonSha256: A }),
} satisfies Record<string, ReportedRun>;
type RunName = keyof typeof RUNS;

const plan = (sha = A, file: string | null = FILE): IncomingReport => ({ kind: 'plan', planJsonSha256: sha, planFileSha256: file });
const planErrored = (message = 'plan failed'): IncomingReport => ({ kind: 'plan-errored', message });
const apply = (file: string | null = null): IncomingReport => ({ kind: 'apply', planFileSha256: file });
const applyErrored = (message = 'apply failed', file: string | null = null): IncomingReport => ({
  kind: 'apply-errored',
  message,
  planFileSha256: file,
});

type Expected = 'take' | 'repeat' | 'conflict' | 'not allowed';

describe('decideReport: take, repeat or refuse a pipeline report', () => {
  it.each<[string, RunName, IncomingReport, Expected]>([
    // The run waits for it: taken, whatever its content.
    ['a plan while planning', 'planning', plan(), 'take'],
    ['a plan without a plan file while planning', 'planning', plan(A, null), 'take'],
    ['a plan error while planning', 'planning', planErrored(), 'take'],
    ['an apply while applying', 'applying', apply(), 'take'],
    ['an apply with the checked plan file', 'applying', apply(FILE), 'take'],
    ['an apply with a plan file where the plan had none', 'applyingNoFile', apply(OTHER_FILE), 'take'],
    ['an apply error while applying', 'applying', applyErrored(), 'take'],
    // The very same report again: answered again, nothing changes.
    ['the same plan again', 'planned', plan(), 'repeat'],
    ['the same plan without a file again', 'plannedNoFile', plan(A, null), 'repeat'],
    ['the same plan after its post-plan task failed', 'postPlanFailed', plan(), 'repeat'],
    ['the same plan after the run was discarded', 'discarded', plan(A, null), 'repeat'],
    ['the same plan while the run applies', 'applying', plan(), 'repeat'],
    ['the same plan after the apply', 'applied', plan(), 'repeat'],
    ['the same plan error again', 'planErrored', planErrored(), 'repeat'],
    ['the same errored plan JSON again', 'planJsonErrored', plan(A, null), 'repeat'],
    ['another plan after an errored plan JSON', 'planJsonErrored', plan(B, null), 'conflict'],
    ['the same apply again', 'applied', apply(), 'repeat'],
    ['the same apply with the checked plan file', 'applied', apply(FILE), 'repeat'],
    ['the same apply error again', 'applyErrored', applyErrored(), 'repeat'],
    // Another plan, or another outcome: a conflict naming both.
    ['another plan', 'planned', plan(B), 'conflict'],
    ['the same plan JSON with another plan file', 'planned', plan(A, OTHER_FILE), 'conflict'],
    ['the same plan JSON without the plan file it came with', 'planned', plan(A, null), 'conflict'],
    ['the same plan JSON with a plan file where it had none', 'plannedNoFile', plan(A, FILE), 'conflict'],
    ['a plan error after a good plan', 'planned', planErrored(), 'conflict'],
    ['a plan error after the run applied', 'applied', planErrored(), 'conflict'],
    ['a good plan after a plan error', 'planErrored', plan(), 'conflict'],
    ['another plan error message', 'planErrored', planErrored('something else'), 'conflict'],
    ['a plan error after an errored plan JSON', 'planJsonErrored', planErrored('Terraform marked the plan errored'), 'conflict'],
    ['a plan after the timeout ended the run', 'planTimedOut', plan(), 'conflict'],
    ['a plan error after the timeout ended the run', 'planTimedOut', planErrored(), 'conflict'],
    ['an apply error after a finished apply', 'applied', applyErrored(), 'conflict'],
    ['a finished apply after an apply error', 'applyErrored', apply(), 'conflict'],
    ['another apply error message', 'applyErrored', applyErrored('other'), 'conflict'],
    ['an apply with another plan file while applying', 'applying', apply(OTHER_FILE), 'conflict'],
    ['an apply error with another plan file', 'applying', applyErrored('apply failed', OTHER_FILE), 'conflict'],
    ['a repeated apply with another plan file', 'applied', apply(OTHER_FILE), 'conflict'],
    // Never waited for it, or ended without it: the run takes no such report.
    ['a plan before planning', 'pending', plan(), 'not allowed'],
    ['a plan during pre_plan', 'prePlan', plan(), 'not allowed'],
    ['an apply before planning', 'pending', apply(), 'not allowed'],
    ['an apply while planning', 'planning', apply(), 'not allowed'],
    ['an apply error while planning', 'planning', applyErrored(), 'not allowed'],
    ['an apply after the plan', 'planned', apply(), 'not allowed'],
    ['an apply after a plan error', 'planErrored', apply(), 'not allowed'],
    ['an apply after the post-plan task failed', 'postPlanFailed', apply(), 'not allowed'],
    ['a plan after a cancel while planning', 'canceledPlanning', plan(), 'not allowed'],
    ['a plan error after a cancel while planning', 'canceledPlanning', planErrored(), 'not allowed'],
    ['an apply after a cancel while applying', 'canceledApplying', apply(), 'not allowed'],
    ['an apply after a discard', 'discarded', apply(), 'not allowed'],
  ])('%s → %s', (_, name, report, expected) => {
    const decision = decideReport(RUNS[name], report);
    const kind = decision.kind === 'refuse' ? (decision.title === 'conflicting report' ? 'conflict' : 'not allowed') : decision.kind;
    expect(kind).toBe(expected);
  });

  it('a conflict names both plans, their hashes and what to do', () => {
    const decision = decideReport(RUNS.planned, plan(B, null));
    expect(decision).toEqual({
      kind: 'refuse',
      title: 'conflicting report',
      detail: expect.stringContaining(`plan JSON sha256 ${A}`),
      meta: {
        taken: { outcome: 'finished', 'plan-json-sha256': A, 'plan-file-sha256': FILE },
        refused: { 'plan-json-sha256': B, 'plan-file-sha256': null },
      },
    });
    if (decision.kind === 'refuse') {
      expect(decision.detail).toContain(`plan JSON sha256 ${B}`);
      expect(decision.detail).toContain('start a new run');
    }
  });

  it('a failure after a success names both outcomes and the message', () => {
    const decision = decideReport(RUNS.applied, applyErrored('quota exceeded'));
    expect(decision).toMatchObject({
      title: 'conflicting report',
      meta: { taken: { outcome: 'finished' }, refused: { outcome: 'errored', message: 'quota exceeded' } },
    });
    if (decision.kind === 'refuse') expect(decision.detail).toMatch(/reported already \(finished\).*\(errored, message "quota exceeded"\)/);
  });

  it('a plan file applied that is not the one checked names both files', () => {
    const decision = decideReport(RUNS.applying, apply(OTHER_FILE));
    expect(decision).toMatchObject({
      title: 'conflicting report',
      meta: { taken: { 'plan-file-sha256': FILE }, refused: { 'plan-file-sha256': OTHER_FILE } },
    });
    if (decision.kind === 'refuse')
      expect(decision.detail).toContain(`(sha256 ${OTHER_FILE}) is not the plan file checked with this run's plan (sha256 ${FILE})`);
  });

  it('a report the run never waited for says which status takes it', () => {
    expect(decideReport(RUNS.pending, plan())).toEqual({
      kind: 'refuse',
      title: 'transition not allowed',
      detail: 'A run that is pending takes no plan report: only a run that is planning does.',
    });
    expect(decideReport(RUNS.canceledPlanning, plan())).toMatchObject({
      detail: expect.stringContaining('was canceled while it waited for its plan'),
    });
  });
});
