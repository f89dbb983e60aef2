import { describe, expect, it } from '@jest/globals';
import { Glob } from '../src/glob.ts';
import { CliError, EXIT } from '../src/exit-codes.ts';
import { isIgnored, judge, parseIgnoreFile, reincludeBelow, rootScope, type DirectoryScope } from '../src/ignore.ts';

describe('.terraformignore rules', () => {
  it.each([
    ['*.tfvars', 'prod.tfvars', true],
    ['*.tfvars', 'env/prod.tfvars', false],
    ['**/*.tfvars', 'env/prod.tfvars', true],
    ['**/*.tfvars', 'prod.tfvars', true],
    ['a/**/b', 'a/b', true],
    ['a/**/b', 'a/x/y/b', true],
    ['a/**', 'a/x/y', true],
    ['file?.tf', 'file1.tf', true],
    ['file?.tf', 'file10.tf', false],
    ['[abc].tf', 'b.tf', true],
    ['[!abc].tf', 'b.tf', false],
    ['[!abc].tf', 'd.tf', true],
    ['dot.tf', 'dotxtf', false],
  ])('glob %s against %s: %s', (glob, path, matches) => {
    expect(new Glob(glob).matches(path)).toBe(matches);
  });

  const rules = parseIgnoreFile(
    [
      '# secrets and local state',
      '*.tfvars',
      '!public.tfvars',
      'terraform.tfstate*',
      '/build/',
      'logs/',
      '!logs/keep.log',
      'docs/*.md',
      '',
    ].join('\n'),
  );

  it.each([
    // Defaults: .git and .terraform out, .terraform/modules in.
    ['.git/config', false, true],
    ['modules/vpc/.git/HEAD', false, true],
    ['.terraform/providers/registry/aws', false, true],
    ['.terraform/modules/vpc/main.tf', false, false],
    ['.terraform.lock.hcl', false, false],
    // Unanchored patterns match at any depth; later `!` rules win.
    ['prod.tfvars', false, true],
    ['env/prod.tfvars', false, true],
    ['public.tfvars', false, false],
    ['terraform.tfstate.backup', false, true],
    // A leading slash anchors at the root; a trailing slash is for directories only.
    ['build/out.zip', false, true],
    ['modules/build/main.tf', false, false],
    ['build', false, false],
    ['logs/today.log', false, true],
    ['modules/logs/x.log', false, true],
    ['logs/keep.log', false, false],
    // A pattern with a slash still matches at any depth (Terraform prefixes **/).
    ['docs/readme.md', false, true],
    ['modules/docs/readme.md', false, true],
    ['docs/sub/readme.md', false, false],
    ['main.tf', false, false],
  ])('%s (directory: %s) ignored: %s', (path, directory, ignored) => {
    expect(isIgnored(rules, path, directory)).toBe(ignored);
  });

  it('applies the defaults without a .terraformignore, and lets a file re-include what they leave out', () => {
    const defaults = parseIgnoreFile('');
    expect(isIgnored(defaults, '.git', true)).toBe(true);
    expect(isIgnored(defaults, 'main.tf', false)).toBe(false);
    const reinclude = parseIgnoreFile('!.git/keep');
    expect(isIgnored(reinclude, '.git/keep', false)).toBe(false);
    expect(isIgnored(reinclude, '.git/HEAD', false)).toBe(true);
  });

  it('leaves out .git wherever it is, inside .terraform/modules too, unless the file brings something back', () => {
    const defaults = parseIgnoreFile('');
    expect(isIgnored(defaults, '.terraform/modules/vpc/.git/HEAD', false)).toBe(true);
    expect(isIgnored(defaults, '.git/x/.terraform/modules/y.tf', false)).toBe(true);
    expect(isIgnored(defaults, 'modules/app/.terraform/modules/y.tf', false)).toBe(false);
    expect(isIgnored(parseIgnoreFile('!*.tf'), '.git/hooks/x.tf', false)).toBe(false);
  });

  /** Which left-out directories must still be listed: those a later `!` rule could reach into. */
  it.each([
    ['', '.git', undefined],
    ['', '.terraform', '!.terraform/modules/'],
    ['', '.terraform/providers', '!.terraform/modules/'],
    ['build/\n!/build/keep.tf', 'build', '!/build/keep.tf'],
    ['build/\n!/build/keep.tf', 'src/build', undefined],
    ['build/\n!*.tf', 'build', '!*.tf'],
    ['build/\n!*.tf\nbuild/', 'build', undefined],
    ['!*.tf', '.git', '!*.tf'],
  ])('with %j, a left-out %s is listed for %s', (file, directory, rule) => {
    const rules = parseIgnoreFile(file);
    let scope: DirectoryScope = rootScope(rules);
    let ignored = false;
    for (const name of directory.split('/')) {
      const verdict = judge(rules, scope, name, true);
      ignored = verdict.ignored;
      scope = verdict.scope as DirectoryScope;
    }
    expect(ignored).toBe(true);
    expect(reincludeBelow(rules, scope)?.text).toBe(rule);
  });

  it('refuses a pattern it cannot read, naming its line', () => {
    let error: unknown;
    try {
      parseIgnoreFile('# comment\n*.tfvars\n[z-a]\n');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).code).toBe(EXIT.usage);
    expect((error as CliError).message).toBe('.terraformignore line 3: "[z-a]": the range z-a is backwards');
  });
});
