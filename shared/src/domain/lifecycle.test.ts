import { describe, expect, it } from '@jest/globals';
import { evaluateStage, stageStartedAtCreation, type ResultSnapshot, type StageEvaluation } from './lifecycle.ts';
import { ENFORCEMENT_LEVELS, RUN_STAGES, TASK_RESULT_STATUSES, type RunStage } from './statuses.ts';
import { referenceEvaluation, m, a, passed, blocked } from './lifecycle.reference.ts';

// ---------------------------------------------------------------------------------------------
// evaluateStage
// ---------------------------------------------------------------------------------------------

const RESULT_KINDS: ResultSnapshot[] = TASK_RESULT_STATUSES.flatMap((status) =>
  ENFORCEMENT_LEVELS.map((enforcementLevel) => ({ status, enforcementLevel })),
);

/** Every multiset of `items` with at most `maxSize` elements (non-decreasing index sequences). */
function multisets<T>(items: readonly T[], maxSize: number): T[][] {
  const all: T[][] = [[]];
  const grow = (prefix: T[], from: number): void => {
    if (prefix.length === maxSize) return;
    for (let index = from; index < items.length; index += 1) {
      const next = [...prefix, items[index] as T];
      all.push(next);
      grow(next, index);
    }
  };
  grow([], 0);
  return all;
}

const RESULT_MULTISETS = multisets(RESULT_KINDS, 3);
const describeResults = (results: readonly ResultSnapshot[]): string =>
  results.length === 0 ? 'no results' : results.map((result) => `${result.enforcementLevel} ${result.status}`).join(' + ');

interface NamedCase {
  name: string;
  stage: RunStage;
  results: ResultSnapshot[];
  expected: StageEvaluation | null;
}

const NAMED_CASES: NamedCase[] = [
  { name: 'no results → passed', stage: 'pre_plan', results: [], expected: passed() },
  { name: 'post_apply with no results → passed', stage: 'post_apply', results: [], expected: passed() },
  { name: 'mandatory passed → passed', stage: 'pre_plan', results: [m('passed')], expected: passed() },
  { name: 'advisory passed → passed', stage: 'post_plan', results: [a('passed')], expected: passed() },
  { name: 'three mandatory passed → passed', stage: 'pre_apply', results: [m('passed'), m('passed'), m('passed')], expected: passed() },
  {
    name: 'advisory failed + mandatory passed → passed with warning',
    stage: 'pre_plan',
    results: [a('failed'), m('passed')],
    expected: passed(true),
  },
  { name: 'advisory failed alone → passed with warning', stage: 'post_plan', results: [a('failed')], expected: passed(true) },
  { name: 'advisory errored → passed with warning', stage: 'pre_apply', results: [a('errored')], expected: passed(true) },
  { name: 'advisory unreachable → passed with warning', stage: 'pre_plan', results: [a('unreachable')], expected: passed(true) },
  { name: 'advisory canceled → passed with warning', stage: 'pre_plan', results: [a('canceled')], expected: passed(true) },
  { name: 'mandatory failed → failed', stage: 'pre_plan', results: [m('failed')], expected: blocked('failed') },
  { name: 'mandatory errored → errored', stage: 'post_plan', results: [m('errored')], expected: blocked('errored') },
  { name: 'mandatory unreachable → unreachable', stage: 'pre_apply', results: [m('unreachable')], expected: blocked('unreachable') },
  { name: 'mandatory canceled → canceled', stage: 'pre_plan', results: [m('canceled')], expected: blocked('canceled') },
  {
    name: 'mandatory unreachable + mandatory errored → errored',
    stage: 'pre_plan',
    results: [m('unreachable'), m('errored')],
    expected: blocked('errored'),
  },
  {
    name: 'mandatory errored + mandatory failed → failed',
    stage: 'post_plan',
    results: [m('errored'), m('failed')],
    expected: blocked('failed'),
  },
  {
    name: 'mandatory failed + mandatory canceled → canceled',
    stage: 'pre_apply',
    results: [m('failed'), m('canceled')],
    expected: blocked('canceled'),
  },
  {
    name: 'mandatory passed + mandatory unreachable → unreachable',
    stage: 'pre_plan',
    results: [m('passed'), m('unreachable')],
    expected: blocked('unreachable'),
  },
  {
    name: 'mandatory failed + advisory failed → failed with warning',
    stage: 'pre_plan',
    results: [m('failed'), a('failed')],
    expected: blocked('failed', true),
  },
  {
    name: 'mandatory errored + advisory passed → errored without warning',
    stage: 'post_plan',
    results: [m('errored'), a('passed')],
    expected: blocked('errored'),
  },
  {
    name: 'mandatory failed + advisory errored + mandatory passed → failed with warning',
    stage: 'pre_apply',
    results: [m('failed'), a('errored'), m('passed')],
    expected: blocked('failed', true),
  },
  { name: 'post_apply mandatory failed → passed with warning', stage: 'post_apply', results: [m('failed')], expected: passed(true) },
  {
    name: 'post_apply mandatory errored + mandatory canceled → passed with warning',
    stage: 'post_apply',
    results: [m('errored'), m('canceled')],
    expected: passed(true),
  },
  {
    name: 'post_apply mandatory and advisory passed → passed without warning',
    stage: 'post_apply',
    results: [m('passed'), a('passed')],
    expected: passed(),
  },
  { name: 'any open result → null (mandatory pending)', stage: 'pre_plan', results: [m('pending')], expected: null },
  { name: 'any open result → null (advisory pending)', stage: 'post_plan', results: [a('pending'), m('failed')], expected: null },
  {
    name: 'any open result → null (mandatory running beside a final failure)',
    stage: 'pre_apply',
    results: [m('running'), m('failed')],
    expected: null,
  },
  {
    name: 'any open result → null (advisory running beside mandatory passed)',
    stage: 'pre_plan',
    results: [a('running'), m('passed')],
    expected: null,
  },
  { name: 'any open result → null (post_apply)', stage: 'post_apply', results: [a('pending'), m('passed')], expected: null },
];

describe('evaluateStage', () => {
  it('enumerates every multiset of up to three results (1 + 14 + 105 + 560)', () => {
    expect(RESULT_KINDS).toHaveLength(14);
    expect(RESULT_MULTISETS).toHaveLength(680);
    expect(new Set(RESULT_MULTISETS.map(describeResults)).size).toBe(680);
  });

  const exhaustive = RUN_STAGES.flatMap((stage) =>
    RESULT_MULTISETS.map((results) => ({ label: `${stage}: ${describeResults(results)}`, stage, results })),
  );
  it.each(exhaustive)('$label', ({ stage, results }) => {
    const expected = referenceEvaluation(stage, results);
    expect(evaluateStage(stage, results)).toEqual(expected);
    // The order in which results are listed does not matter.
    expect(evaluateStage(stage, [...results].reverse())).toEqual(expected);
  });

  it.each(NAMED_CASES)('$name', ({ stage, results, expected }) => {
    expect(evaluateStage(stage, results)).toEqual(expected);
    expect(referenceEvaluation(stage, results)).toEqual(expected);
  });

  it('never blocks post_apply and never warns when everything passed', () => {
    for (const results of RESULT_MULTISETS) {
      const postApply = evaluateStage('post_apply', results);
      if (postApply) expect(postApply.status).toBe('passed');
      for (const stage of RUN_STAGES) {
        const evaluation = evaluateStage(stage, results);
        if (results.every((result) => result.status === 'passed')) expect(evaluation).toEqual(passed());
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------
// nextRunStep: every run status × flags × stage configuration
// ---------------------------------------------------------------------------------------------

describe('stageStartedAtCreation', () => {
  // Every set of run stages with tasks (16), with every flag combination (8): a run starts its pre_plan
  // stage as it is created exactly when it has one; otherwise its first step is the worker's (planning).
  const stageSets = Array.from({ length: 1 << RUN_STAGES.length }, (_, mask) => RUN_STAGES.filter((_, bit) => (mask & (1 << bit)) !== 0));
  const flags = [false, true].flatMap((planOnly) =>
    [false, true].flatMap((autoApply) => [false, true].map((overridesEnabled) => ({ planOnly, autoApply, overridesEnabled }))),
  );
  const table = stageSets.flatMap((stages) =>
    flags.map((run) => ({ label: `[${stages.join(', ')}] ${JSON.stringify(run)}`, stages, run })),
  );

  it('covers 16 stage sets × 8 flag combinations', () => {
    expect(table).toHaveLength(128);
  });

  it.each(table)('$label', ({ stages, run }) => {
    const expected = stages.includes('pre_plan') ? { stage: 'pre_plan', runStatus: 'pre_plan_running' } : undefined;
    expect(stageStartedAtCreation(run, stages)).toEqual(expected);
  });
});
