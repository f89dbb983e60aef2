import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { CliError, EXIT } from '../src/exit-codes.ts';
import { Glob, GlobSyntaxError, type StepMeter } from '../src/glob.ts';
import { isIgnored, parseIgnoreFile } from '../src/ignore.ts';
import { referenceIsIgnored, referenceRegex, referenceRules } from './support/reference-ignore.ts';

/**
 * Fuzzing the ignore patterns: the automaton against the obvious RegExp reading on small inputs (where
 * backtracking is affordable), any text as a pattern file (an answer or a usage error naming a line,
 * never another exception), and the visit bound on long inputs, where a backtracking matcher would not
 * finish.
 */
const PATTERN_CHARS = ['a', 'b', '/', '*', '*', '?', '[', ']', '!', '^', '-', '\\', '.', 'é', '😀'];
const TEXT_CHARS = ['a', 'b', '/', '.', '-', ']', '[', '*', '!', '\\', 'é', '😀', '\n'];

const stringOf = (chars: readonly string[], maxLength: number): fc.Arbitrary<string> =>
  fc.array(fc.constantFrom(...chars), { maxLength }).map((parts) => parts.join(''));

const glob = stringOf(PATTERN_CHARS, 12);
const text = stringOf(TEXT_CHARS, 10);

describe('ignore patterns, fuzzed', () => {
  it('the automaton matches exactly what the RegExp reading matches, and refuses exactly what it cannot read', () => {
    fc.assert(
      fc.property(glob, fc.array(text, { minLength: 1, maxLength: 8 }), (pattern, texts) => {
        const reference = referenceRegex(pattern);
        if (reference === 'invalid') {
          expect(() => new Glob(pattern)).toThrow(GlobSyntaxError);
          return;
        }
        const compiled = new Glob(pattern);
        for (const candidate of texts)
          expect([pattern, candidate, compiled.matches(candidate)]).toEqual([pattern, candidate, reference.test(candidate)]);
      }),
      { numRuns: 3000 },
    );
  });

  /** Paths of a small tree's names, so that rules and paths meet often. */
  const segment = fc.constantFrom('a', 'b', 'c.tf', 'd.tfvars', '.git', '.terraform', 'modules', 'build', 'x y');
  const path = fc.array(segment, { minLength: 1, maxLength: 5 }).map((parts) => parts.join('/'));
  const line = fc.oneof(
    fc.constantFrom('*.tfvars', '!d.tfvars', 'build/', '!build/c.tf', '/a', 'a/**/c.tf', '**/b', '!.git/c.tf', '[ab]', '?', '!modules/'),
    fc.constantFrom('# comment', '', '  *.tf  ', '!*.tf', '.terraform/', 'x*', '/b/', 'modules/*', '!/a/b', '**', '!**/c.tf', '[!a]*'),
    glob,
  );

  it('judging a path name by name, as the walk does, agrees with judging it whole against every directory', () => {
    fc.assert(
      fc.property(
        fc.array(line, { maxLength: 6 }),
        fc.array(fc.tuple(path, fc.boolean()), { minLength: 1, maxLength: 10 }),
        (lines, paths) => {
          const file = lines.join('\n');
          const reference = referenceRules(file);
          if (reference === 'invalid') {
            expect(() => parseIgnoreFile(file)).toThrow(CliError);
            return;
          }
          const rules = parseIgnoreFile(file);
          for (const [candidate, directory] of paths) {
            expect([file, candidate, directory, isIgnored(rules, candidate, directory)]).toEqual([
              file,
              candidate,
              directory,
              referenceIsIgnored(reference, candidate, directory),
            ]);
          }
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('any text as a .terraformignore gives rules or a usage error naming a line, nothing else', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (file) => {
        try {
          parseIgnoreFile(file);
        } catch (error) {
          expect(error).toBeInstanceOf(CliError);
          expect((error as CliError).code).toBe(EXIT.usage);
          expect((error as CliError).message).toMatch(/^\.terraformignore line \d+: /);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('long texts against any pattern stay within (2n + 1) × m visits', () => {
    fc.assert(
      fc.property(glob, stringOf(TEXT_CHARS, 2000), (pattern, long) => {
        fc.pre(referenceRegex(pattern) !== 'invalid');
        const compiled = new Glob(pattern);
        const meter: StepMeter = { steps: 0 };
        compiled.matches(long, meter);
        expect(meter.steps).toBeLessThanOrEqual((2 * [...long].length + 1) * compiled.size);
      }),
      { numRuns: 300 },
    );
  });
});
