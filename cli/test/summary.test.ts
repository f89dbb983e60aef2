import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cell, renderSummary, type SummaryInput } from '../src/summary.ts';

const GOLDEN = fileURLToPath(new URL('./fixtures/summary.golden.md', import.meta.url));

/** The summary of a post_plan stage with a passing mandatory and a failing advisory task, as CI shows it. */
export const SUMMARY_INPUT: SummaryInput = {
  address: 'https://runtasks.example.com',
  command: 'plan',
  runId: 'run-GoldenRun0001',
  runStatus: 'post_plan_completed',
  verdict: { kind: 'go' },
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
          url: 'https://cost.example.com/r/2',
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
    const markdown = renderSummary({ ...SUMMARY_INPUT, stages: [], verdict: { kind: 'blocked', reason: 'run errored: pre_plan blocked' } });
    expect(markdown).toContain('No run tasks at this stage.');
    expect(markdown).toContain('**Verdict: blocked** (run errored: pre\\_plan blocked).');
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
