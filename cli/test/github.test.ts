import { describe, expect, it } from '@jest/globals';
import { annotations, escapeData, escapeProperty } from '../src/github.ts';
import type { ResultView, StageView } from '../src/verdict.ts';

const result = (task: string, status: string, enforcement: string, stage: ResultView['stage'] = 'post_plan'): ResultView => ({
  id: `taskrs-${task}`,
  task,
  stage,
  enforcement,
  status,
  message: `${task}: 2 findings, 50% over`,
  url: `https://tasks.example.com/${task}`,
  outcomes: 0,
});
const PAGE = 'https://runtasks.example.com/app/acme/workspaces/network/runs/run-1';

describe('GitHub annotations', () => {
  it('escapes what the runner would read as a command', () => {
    expect(escapeData('50% done\r\nnext')).toBe('50%25 done%0D%0Anext');
    expect(escapeProperty('post_plan a: failed, twice')).toBe('post_plan a%3A failed%2C twice');
  });

  it('an error for each mandatory task that blocked the run, a warning for any other failure, nothing for a pass', () => {
    const gate = result('gate', 'failed', 'mandatory');
    const stages: StageView[] = [
      {
        id: 'ts-1',
        stage: 'post_plan',
        status: 'failed',
        results: [gate, result('cost', 'failed', 'advisory'), result('ok', 'passed', 'mandatory')],
      },
      { id: 'ts-2', stage: 'post_apply', status: 'passed', results: [result('audit', 'errored', 'mandatory', 'post_apply')] },
    ];
    const blocked = {
      kind: 'blocked' as const,
      reason: 'post_plan blocked',
      blocker: { stage: 'post_plan' as const, stageId: 'ts-1', results: [gate] },
    };
    expect(annotations(stages, blocked, PAGE)).toEqual([
      `::error title=post_plan gate (mandatory)%3A failed::gate: 2 findings, 50%25 over%0Ahttps://tasks.example.com/gate%0Arun: ${PAGE}`,
      `::warning title=post_plan cost (advisory)%3A failed::cost: 2 findings, 50%25 over%0Ahttps://tasks.example.com/cost%0Arun: ${PAGE}`,
      `::warning title=post_apply audit (mandatory)%3A errored::audit: 2 findings, 50%25 over%0Ahttps://tasks.example.com/audit%0Arun: ${PAGE}`,
    ]);
    // Overridden: the run went on, so the mandatory failure only warns.
    expect(annotations(stages, { kind: 'go' }, PAGE)[0]).toMatch(/^::warning title=post_plan gate/);
  });
});
