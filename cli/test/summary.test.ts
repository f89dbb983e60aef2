import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cell, link, renderSummary, type SummaryInput } from '../src/summary.ts';

const GOLDEN = fileURLToPath(new URL('./fixtures/summary.golden.md', import.meta.url));

/** The summary of a post_plan stage with a passing mandatory and a failing advisory task, as CI shows it. */
export const SUMMARY_INPUT: SummaryInput = {
  command: 'plan',
  runId: 'run-GoldenRun0001',
  page: 'https://runtasks.example.com/app/acme/workspaces/network/runs/run-GoldenRun0001',
  runStatus: 'post_plan_completed',
  verdict: { kind: 'go' },
  because: null,
  plan: { status: 'finished', additions: 2, changes: 1, destructions: 1, imports: 1, hasChanges: true },
  stages: [
    {
      id: 'ts-golden',
      stage: 'post_plan',
      status: 'passed',
      results: [
        {
          id: 'taskrs-1',
          task: 'security-scan',
          stage: 'post_plan',
          enforcement: 'mandatory',
          status: 'passed',
          message: 'No findings in 5 resource changes',
          url: 'https://scanner.example.com/results/taskrs-1',
          outcomes: 1,
        },
        {
          id: 'taskrs-2',
          task: 'cost-check',
          stage: 'post_plan',
          enforcement: 'advisory',
          status: 'failed',
          message: 'Monthly cost +$120 | over the\nteam budget',
          url: 'https://cost.example.com/r/(2)',
          outcomes: 2,
        },
        {
          id: 'taskrs-3',
          task: 'tagging',
          stage: 'post_plan',
          enforcement: 'advisory',
          status: 'unreachable',
          message: null,
          url: null,
          outcomes: 0,
        },
      ],
    },
  ],
};

describe('the Markdown summary', () => {
  it('matches the golden file', () => {
    expect(renderSummary(SUMMARY_INPUT)).toBe(readFileSync(GOLDEN, 'utf8'));
  });

  it('says when a stage has no tasks and when a run is blocked', () => {
    const markdown = renderSummary({
      ...SUMMARY_INPUT,
      stages: [],
      verdict: { kind: 'blocked', reason: 'run errored: pre_plan blocked' },
      because: 'gate: 2 findings',
    });
    expect(markdown).toContain('No run tasks at this stage.');
    expect(markdown).toContain('**Verdict: blocked** (run errored: pre\\_plan blocked). gate: 2 findings');
  });

  it('shows a failed mandatory post_apply task as the warning it is, under the stage status the service gives', () => {
    const failed = { ...SUMMARY_INPUT.stages[0]!.results[0]!, stage: 'post_apply' as const, status: 'failed' };
    const markdown = renderSummary({
      ...SUMMARY_INPUT,
      command: 'applied',
      stages: [{ id: 'ts-pa', stage: 'post_apply', status: 'passed', results: [failed] }],
    });
    expect(markdown).toContain('#### post_apply: passed (1 failed task only warns)');
    expect(markdown).toContain('| security-scan | mandatory | ⚠️ failed |');
    expect(markdown).not.toContain('❌');
  });

  it.each([
    ['https://scan.example.com/r/(1)', '[details](https://scan.example.com/r/%281%29)'],
    ['https://scan.example.com/a b', '[details](https://scan.example.com/a%20b)'],
    ['javascript:alert(1)', '—'],
    ['not a url', '—'],
    [null, '—'],
  ])('links %j as %j', (url, expected) => {
    expect(link(url)).toBe(expected);
  });

  it.each([
    ['a | b', 'a \\| b'],
    ['line one\nline two', 'line one line two'],
    ['<script>', '\\<script\\>'],
    ['', '—'],
    [null, '—'],
    ['x'.repeat(400), `${'x'.repeat(299)}…`],
  ])('a cell holds %j as %j', (text, expected) => {
    expect(cell(text)).toBe(expected);
  });
});
