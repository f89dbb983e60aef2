import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { archiveDirectory } from '../src/archive.ts';
import { CliError, EXIT } from '../src/exit-codes.ts';
import { referenceIsIgnored, referenceRules } from './support/reference-ignore.ts';

/**
 * Fuzzing the archive: random trees with random `.terraformignore` files, archived by the CLI (which
 * prunes what it walks) and listed by the system's tar, against the reference judging every path of
 * the tree whole (no pruning); and random bytes as a `.terraformignore`, which give an archive or a
 * usage error, never another exception.
 */
describe('the configuration archive, fuzzed', () => {
  let root: string;
  let count = 0;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'runtasks-cli-fuzz-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const freshDirectory = (): string => {
    count += 1;
    const dir = join(root, String(count));
    mkdirSync(dir);
    return dir;
  };

  const listed = (archive: Buffer, dir: string): string[] => {
    writeFileSync(`${dir}.tar.gz`, archive);
    const text = execFileSync('tar', ['-tzf', `${dir}.tar.gz`], { encoding: 'utf8' });
    return text === '' ? [] : text.trimEnd().split('\n').sort();
  };

  const segment = fc.constantFrom('a', 'b', 'c.tf', 'd.tfvars', '.git', '.terraform', 'modules', 'build', 'keep.tf');
  const filePath = fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => parts.join('/'));
  const line = fc.constantFrom(
    '*.tfvars',
    '!d.tfvars',
    'build/',
    '!build/keep.tf',
    '!/build/keep.tf',
    '/a',
    'a/**/c.tf',
    '**/b',
    '!.git/keep.tf',
    '[ab]',
    '?',
    '!modules/',
    '!*.tf',
    '.terraform/',
    'modules/*',
    '!/a/b',
    '**',
    '# comment',
    'keep.tf',
    '!b/',
  );

  it('archives exactly the files the rules keep, however the walk prunes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(filePath, { minLength: 1, maxLength: 14 }),
        fc.array(line, { maxLength: 6 }),
        fc.boolean(),
        async (paths, lines, withLink) => {
          const dir = freshDirectory();
          // A path cannot be both a file and a directory: keep the files no other path goes through.
          const files = paths.filter((path) => !paths.some((other) => other.startsWith(`${path}/`)));
          for (const path of files) {
            mkdirSync(dirname(join(dir, path)), { recursive: true });
            writeFileSync(join(dir, path), path);
          }
          const all = [...files];
          if (withLink && !files.includes('link')) {
            symlinkSync(files[0] as string, join(dir, 'link'));
            all.push('link');
          }
          if (lines.length > 0) {
            writeFileSync(join(dir, '.terraformignore'), lines.join('\n'));
            all.push('.terraformignore');
          }
          const rules = referenceRules(lines.join('\n'));
          if (rules === 'invalid') throw new Error('the line pool holds only valid patterns');
          const expected = all.filter((path) => !referenceIsIgnored(rules, path, false)).sort();
          const { archive, files: count } = await archiveDirectory(dir);
          expect({ lines, listed: listed(archive, dir) }).toEqual({ lines, listed: expected });
          expect(count).toBe(expected.length);
        },
      ),
      { numRuns: 40 },
    );
  }, 90_000);

  it('any bytes as a .terraformignore give an archive or a one-line usage error', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 300 }), async (bytes) => {
        const dir = freshDirectory();
        writeFileSync(join(dir, 'main.tf'), '');
        writeFileSync(join(dir, '.terraformignore'), bytes);
        try {
          const { archive } = await archiveDirectory(dir);
          expect(archive.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
        } catch (error) {
          expect(error).toBeInstanceOf(CliError);
          expect((error as CliError).code).toBe(EXIT.usage);
          expect((error as CliError).message).not.toContain('\n');
        }
      }),
      { numRuns: 200 },
    );
  }, 60_000);
});
