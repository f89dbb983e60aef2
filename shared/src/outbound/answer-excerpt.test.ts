import { describe, expect, it } from '@jest/globals';
import { answerExcerpt } from './answer-excerpt.ts';

describe('answerExcerpt', () => {
  it.each([
    ['keeps a short answer as it is', 'all good', [], 'all good'],
    [
      'cuts every echo of every secret',
      'token=s3cret key=k3y again s3cret',
      ['s3cret', 'k3y'],
      'token=[redacted] key=[redacted] again [redacted]',
    ],
    ['ignores empty secrets', 'abc', [''], 'abc'],
    ['replaces NUL', 'a\u0000b', [], 'a\uFFFDb'],
  ])('%s', (_label, text, secrets, expected) => {
    expect(answerExcerpt(text, secrets)).toBe(expected);
  });

  it('cuts a secret that straddles the limit before cutting the text short', () => {
    const excerpt = answerExcerpt(`${'x'.repeat(8)}SECRET-VALUE`, ['SECRET-VALUE'], 10);
    expect(excerpt).toBe('xxxxxxxx[r');
    expect(excerpt).not.toContain('SE');
  });
});
