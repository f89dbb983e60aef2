import { describe, expect, it } from '@jest/globals';
import { isLiveTerminal, liveReporter, plainReporter, resultLine } from '../src/output.ts';
import { ago } from '../src/follow.ts';
import type { ResultView, RunState } from '../src/verdict.ts';

const result = (status: string, enforcement = 'mandatory', task = 'scan'): ResultView => ({
  id: `taskrs-${task}`,
  task,
  stage: 'post_plan',
  enforcement,
  status,
  message: status === 'running' ? null : `Check ${status}\nwith details`,
  url: status === 'running' ? null : `https://tasks.example.test/${task}`,
  outcomes: 1,
});
const state = (status: string, results: ResultView[]): RunState => ({
  id: 'run-1',
  status,
  stages: [{ id: 'ts-1', stage: 'post_plan', status: 'running', results }],
});

function terminal(isTTY: boolean) {
  let written = '';
  return { out: { write: (text: string) => void (written += text), isTTY }, written: () => written };
}

describe('progress output', () => {
  it.each([
    [true, {}, true],
    [true, { CI: 'true' }, false],
    [true, { CI: '1' }, false],
    [true, { CI: 'false' }, true],
    [true, { CI: '0' }, true],
    [true, { TERM: 'dumb' }, false],
    [false, {}, false],
    [undefined, {}, false],
  ])('a stream with isTTY %s and env %j is live: %s', (isTTY, env, live) => {
    expect(isLiveTerminal({ isTTY }, env)).toBe(live);
  });

  it('prints plain lines: each status once, each result once it has ended, nothing for other stages', () => {
    const { out, written } = terminal(false);
    const reporter = plainReporter(out);
    reporter.update(state('post_plan_running', [result('running'), result('running', 'advisory', 'cost')]), ['post_plan']);
    reporter.update(state('post_plan_running', [result('passed'), result('running', 'advisory', 'cost')]), ['post_plan']);
    reporter.update(state('post_plan_completed', [result('passed'), result('failed', 'advisory', 'cost')]), ['post_plan']);
    reporter.update(state('post_plan_completed', [result('passed'), result('failed', 'advisory', 'cost')]), ['pre_apply']);
    reporter.stop();
    expect(written()).toBe(
      [
        'run run-1: post_plan_running',
        '  post_plan scan (mandatory): passed - Check passed with details https://tasks.example.test/scan',
        'run run-1: post_plan_completed',
        '  post_plan cost (advisory): failed (advisory: warns only) - Check failed with details https://tasks.example.test/cost',
        '',
      ].join('\n'),
    );
  });

  it('on a terminal, redraws a spinner and the pending results below the printed lines, and clears them at the end', () => {
    const { out, written } = terminal(true);
    const reporter = liveReporter(out, 60_000);
    reporter.update(state('post_plan_running', [result('running')]), ['post_plan']);
    expect(written()).toMatch(
      /run run-1: post_plan_running\n⠋ run run-1: post_plan_running \(\d+s\)\n {4}post_plan scan \(mandatory\): running\n$/,
    );
    reporter.update(state('post_plan_completed', [result('passed')]), ['post_plan']);
    // The two footer lines are erased (cursor up two lines, clear to the end) before anything new is printed.
    expect(written()).toContain('\x1b[2F\x1b[0J');
    reporter.line('done');
    reporter.stop();
    // The line goes above the footer, which `stop` erases for good.
    expect(written()).toMatch(/done\n⠋ run run-1: post_plan_completed \(\d+s\)\n.{8}$/s);
    expect(written().endsWith('\x1b[1F\x1b[0J')).toBe(true);
  });

  it('writes one line per result whatever its message holds', () => {
    expect(resultLine({ ...result('errored', 'advisory'), message: null, url: null })).toBe(
      '  post_plan scan (advisory): errored (advisory: warns only)',
    );
  });
});

describe('the still-waiting line', () => {
  it('counts the silence since the last line printed, in CI; a terminal has its spinner', () => {
    let now = 1000;
    const written: string[] = [];
    const reporter = plainReporter({ write: (text) => written.push(text), isTTY: false }, () => now);
    now += 31_000;
    expect(reporter.quietMs()).toBe(31_000);
    reporter.line('run run-1: still waiting');
    expect(reporter.quietMs()).toBe(0);
    expect(ago(12 * 60_000 + 5_000)).toBe('12 min');
    expect(ago(40_000)).toBe('40 s');
    expect(ago(125 * 60_000)).toBe('2 h 5 min');
  });
});
