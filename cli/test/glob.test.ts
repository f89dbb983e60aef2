import { describe, expect, it } from '@jest/globals';
import { Glob, GlobSyntaxError, isDead, type StepMeter } from '../src/glob.ts';

describe('globs', () => {
  it.each([
    // `*` and `?` stay within a name; `**` crosses directories; `**/` is zero or more whole directories.
    ['*.tf', 'main.tf', true],
    ['*.tf', 'a/main.tf', false],
    ['?.tf', 'a.tf', true],
    ['?.tf', '/.tf', false],
    ['a**b', 'a/x/b', true],
    ['**/b', 'b', true],
    ['**/b', 'xb', false],
    ['**/b', 'x/y/b', true],
    ['a/**', 'a/', true],
    ['a/**', 'a', false],
    ['***', 'a/b', true],
    // Sets: ranges, negation with ! or ^, a ] first is itself, \ makes the next character plain.
    ['[a-c]x', 'bx', true],
    ['[a-c]x', 'dx', false],
    ['[!a-c]x', 'dx', true],
    ['[^a-c]x', 'bx', false],
    ['[]]', ']', true],
    ['[!]]', 'a', true],
    ['[!]]', ']', false],
    ['[a-]', '-', true],
    ['[\\]a]', ']', true],
    ['[\\-]', '-', true],
    // A set without its ] is plain text.
    ['[ab', '[ab', true],
    ['[z-a', '[z-a', true],
    // Escapes and characters that mean something to a regular expression are plain.
    ['\\*.tf', '*.tf', true],
    ['\\*.tf', 'a.tf', false],
    ['a\\', 'a\\', true],
    ['a+b(c)|d$', 'a+b(c)|d$', true],
    ['a.b', 'axb', false],
    // Code points, not UTF-16 halves: one ? is one emoji.
    ['?.tf', '😀.tf', true],
    ['[😀-😂]', '😁', true],
    ['', '', true],
    ['', 'a', false],
  ])('%s against %s: %s', (pattern, text, matches) => {
    expect(new Glob(pattern).matches(text)).toBe(matches);
  });

  it.each([
    ['[z-a]', 'the range z-a is backwards'],
    ['x[b-a].tf', 'the range b-a is backwards'],
    ['[!😂-😀]', 'the range 😂-😀 is backwards'],
  ])('refuses %s', (pattern, message) => {
    expect(() => new Glob(pattern)).toThrow(new GlobSyntaxError(message));
  });

  it('matches in steps: a directory first, then names in it, and knows when nothing more can match', () => {
    const glob = new Glob('**/modules/*.tf');
    const inside = glob.advance(glob.start, 'a/modules/');
    expect(glob.advance(inside, 'main.tf').accepting).toBe(true);
    expect(glob.advance(inside, 'x/main.tf').accepting).toBe(false);
    const anchored = new Glob('build/*.o');
    expect(isDead(anchored.advance(anchored.start, 'src/'))).toBe(true);
    expect(isDead(anchored.advance(anchored.start, 'build/'))).toBe(false);
  });

  /**
   * The line that took minutes as a regular expression. Linear: the visits grow with the text, at most
   * (2n + 1) visits per state, never with the number of ways the stars could split it.
   */
  it('matches in linear time: the visits are bounded by (2n + 1) × m and grow linearly with n', () => {
    const visits = (pattern: string, text: string): { steps: number; bound: number } => {
      const glob = new Glob(pattern);
      const meter: StepMeter = { steps: 0 };
      glob.matches(text, meter);
      return { steps: meter.steps, bound: (2 * [...text].length + 1) * glob.size };
    };
    for (const pattern of ['**a**a**a**a**a**b', '*a*a*a*a*a*a*a*a*b', '**/**/**/**/x', '[a-z]*[a-z]*[a-z]*!']) {
      const short = visits(pattern, 'a'.repeat(200));
      const long = visits(pattern, 'a'.repeat(2000));
      expect(short.steps).toBeLessThanOrEqual(short.bound);
      expect(long.steps).toBeLessThanOrEqual(long.bound);
      expect(long.steps / short.steps).toBeLessThan(11);
    }
    expect(new Glob('**a**a**a**a**a**b').matches('a'.repeat(200))).toBe(false);
  });
});
