import { describe, expect, it } from '@jest/globals';
import type { Command } from '../src/args.ts';
import { verdictOf, warningsOf, type ResultView, type RunState, type Stage, type StageView } from '../src/verdict.ts';

const result = (stage: Stage, status: string, enforcement = 'mandatory', task = 'scan'): ResultView => ({
  id: `taskrs-${stage}-${task}`,
  task,
  stage,
  enforcement,
  status,
  message: null,
  url: null,
  outcomes: 0,
});
const stage = (name: Stage, status: string, results: ResultView[] = []): StageView => ({ id: `ts-${name}`, stage: name, status, results });
const run = (status: string, stages: StageView[] = []): RunState => ({ id: 'run-1', status, stages });

describe('the verdict a command waits for', () => {
  it.each<[Command, string, StageView[], string]>([
    // run start: pre_plan decides; planning means the pipeline may plan.
    ['start', 'pending', [], 'wait'],
    ['start', 'pre_plan_running', [stage('pre_plan', 'running')], 'wait'],
    ['start', 'planning', [stage('pre_plan', 'passed')], 'go'],
    ['start', 'planning', [], 'go'],
    ['start', 'errored', [stage('pre_plan', 'failed', [result('pre_plan', 'failed')])], 'blocked'],
    ['start', 'canceled', [stage('pre_plan', 'canceled')], 'stopped'],
    // run plan: post_plan decides.
    ['plan', 'planning', [], 'wait'],
    ['plan', 'planned', [stage('post_plan', 'pending')], 'wait'],
    ['plan', 'planned', [stage('pre_plan', 'passed')], 'go'],
    ['plan', 'post_plan_running', [stage('post_plan', 'running')], 'wait'],
    ['plan', 'post_plan_completed', [stage('post_plan', 'passed')], 'go'],
    ['plan', 'planned_and_finished', [], 'go'],
    ['plan', 'confirmed', [], 'go'],
    ['plan', 'errored', [stage('post_plan', 'errored', [result('post_plan', 'unreachable')])], 'blocked'],
    ['plan', 'errored', [], 'stopped'],
    ['plan', 'discarded', [stage('post_plan', 'awaiting_override')], 'blocked'],
    ['plan', 'discarded', [stage('post_plan', 'canceled', [result('post_plan', 'failed')])], 'blocked'],
    ['plan', 'discarded', [stage('post_plan', 'canceled', [result('post_plan', 'canceled')])], 'stopped'],
    // run apply: pre_apply decides; applying means the pipeline may apply.
    ['apply', 'confirmed', [], 'wait'],
    ['apply', 'pre_apply_running', [stage('pre_apply', 'running')], 'wait'],
    ['apply', 'applying', [stage('pre_apply', 'passed')], 'go'],
    ['apply', 'errored', [stage('pre_apply', 'failed', [result('pre_apply', 'failed')])], 'blocked'],
    // run applied: post_apply never blocks, but its results are waited for.
    ['applied', 'applying', [], 'wait'],
    ['applied', 'applied', [], 'go'],
    ['applied', 'applied', [stage('post_apply', 'pending')], 'wait'],
    ['applied', 'post_apply_running', [stage('post_apply', 'running')], 'wait'],
    ['applied', 'post_apply_completed', [stage('post_apply', 'failed', [result('post_apply', 'failed')])], 'go'],
    ['applied', 'errored', [], 'stopped'],
    // run watch: the end of the run.
    ['watch', 'post_plan_completed', [], 'wait'],
    ['watch', 'applied', [], 'go'],
    ['watch', 'applied', [stage('post_apply', 'running')], 'wait'],
    ['watch', 'planned_and_finished', [], 'go'],
    ['watch', 'errored', [stage('pre_apply', 'failed', [result('pre_apply', 'failed')])], 'blocked'],
    // run cancel and discard: the end of the run, whichever it is.
    ['cancel', 'planning', [], 'wait'],
    ['cancel', 'canceled', [stage('pre_plan', 'canceled')], 'go'],
    ['cancel', 'errored', [stage('pre_plan', 'failed', [result('pre_plan', 'failed')])], 'go'],
    ['discard', 'post_plan_completed', [], 'wait'],
    ['discard', 'discarded', [], 'go'],
    ['cancel', 'applied', [stage('post_apply', 'running')], 'wait'],
    ['cancel', 'post_apply_completed', [], 'go'],
  ])('%s with the run %s: %#', (command, status, stages, kind) => {
    expect(verdictOf(command, run(status, stages), true).kind).toBe(kind);
  });

  it.each(['pre_plan', 'post_plan', 'pre_apply'])('waits through %s_awaiting_decision, or is blocked at once without waiting', (name) => {
    const state = run(`${name}_awaiting_decision`, [stage(name as Stage, 'awaiting_override', [result(name as Stage, 'failed')])]);
    expect(verdictOf('watch', state, true)).toEqual({
      kind: 'wait',
      awaitingOverride: true,
      blocker: { stage: name, stageId: `ts-${name}`, results: [result(name as Stage, 'failed')] },
    });
    expect(verdictOf('plan', state, false)).toMatchObject({ kind: 'blocked', reason: expect.stringContaining('waits for an override') });
  });

  it('names the mandatory tasks that blocked the run', () => {
    const state = run('errored', [
      stage('post_plan', 'failed', [
        result('post_plan', 'failed', 'mandatory', 'tfsec'),
        result('post_plan', 'failed', 'advisory', 'cost'),
      ]),
    ]);
    expect(verdictOf('plan', state, true)).toEqual({
      kind: 'blocked',
      reason: 'run errored: post_plan blocked by mandatory task tfsec',
      blocker: { stage: 'post_plan', stageId: 'ts-post_plan', results: [result('post_plan', 'failed', 'mandatory', 'tfsec')] },
    });
  });

  it('warns of every failed result that did not stop the run', () => {
    const stages = [stage('post_plan', 'passed', [result('post_plan', 'passed'), result('post_plan', 'failed', 'advisory', 'cost')])];
    expect(warningsOf(stages).map((item) => item.task)).toEqual(['cost']);
  });
});
