import { describe, expect, it } from '@jest/globals';
import { claimPatternProblems, claimsMatch, globRegExp } from './ci-claims.ts';

describe('CI claim patterns', () => {
  it.each([
    ['octo/app', 'octo/app', true],
    ['octo/app', 'octo/app2', false],
    ['octo/*', 'octo/app', true],
    ['octo/*', 'octo/app/sub', false],
    ['octo/*', 'evil/octo/app', false],
    ['refs/heads/**', 'refs/heads/release/1.2', true],
    ['refs/heads/main', 'refs/heads/main-evil', false],
    ['refs/tags/v?', 'refs/tags/v1', true],
    ['refs/tags/v?', 'refs/tags/v12', false],
    ['a.b', 'axb', false],
    ['(x)+', '(x)+', true],
    ['prod*', 'production', true],
  ])('%s matches %s: %s', (pattern, value, expected) => {
    expect(globRegExp(pattern).test(value)).toBe(expected);
  });

  it.each([
    [{ repository: 'octo/app' }, { repository: 'octo/app', ref: 'refs/heads/main' }, true],
    [{ repository: 'octo/app', ref: 'refs/heads/main' }, { repository: 'octo/app', ref: 'refs/heads/dev' }, false],
    [{ environment: 'prod' }, { repository: 'octo/app' }, false],
    [{ project_id: '42' }, { project_id: 42 }, true],
    [{ ref_protected: 'true' }, { ref_protected: true }, true],
    [{ repository: 'octo/app' }, { repository: ['octo/app'] }, false],
    [{ toString: 'x' }, {}, false],
  ])('rule %j against claims %j: %s', (patterns, claims, expected) => {
    expect(claimsMatch(patterns, claims)).toBe(expected);
  });

  it.each([
    [{ repository: 'octo/app' }, []],
    [{}, [null]],
    [{ repository: '*' }, ['repository']],
    [{ repository: '**/*' }, ['repository']],
    [{ aud: 'x' }, ['aud']],
    [{ 'bad name': 'x' }, ['bad name']],
    [{ repository: '' }, ['repository']],
    [{ repository: 7 }, ['repository']],
    [{ repository: 'x'.repeat(256) }, ['repository']],
    [Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`c${index}`, 'x'])), [null]],
  ])('problems of %j are at %j', (patterns, keys) => {
    expect(claimPatternProblems(patterns).map((problem) => problem.key)).toEqual(keys);
  });
});
