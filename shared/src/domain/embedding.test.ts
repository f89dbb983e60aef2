import { describe, expect, it } from '@jest/globals';
import { needsProbe, shouldEmbed, type EmbeddedMode } from './embedding.ts';

describe('shouldEmbed', () => {
  it.each<[EmbeddedMode, boolean, boolean, boolean]>([
    // mode, URL set, default answers → embed
    ['auto', false, false, true],
    ['auto', false, true, false],
    ['auto', true, false, false],
    ['auto', true, true, false],
    ['always', false, false, true],
    ['always', false, true, true],
    ['always', true, false, false],
    ['always', true, true, false],
    ['never', false, false, false],
    ['never', false, true, false],
    ['never', true, false, false],
    ['never', true, true, false],
  ])('%s, URL set %s, default answers %s → %s', (mode, urlSet, answers, expected) => {
    expect(shouldEmbed(mode, urlSet, answers)).toBe(expected);
  });
});

describe('needsProbe', () => {
  it.each<[EmbeddedMode, boolean, boolean]>([
    ['auto', false, true],
    ['auto', true, false],
    ['always', false, false],
    ['always', true, false],
    ['never', false, false],
    ['never', true, false],
  ])('%s, URL set %s → %s', (mode, urlSet, expected) => {
    expect(needsProbe(mode, urlSet)).toBe(expected);
  });
});
