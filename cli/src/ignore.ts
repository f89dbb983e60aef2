import { CliError } from './exit-codes.ts';
import { DEAD, Glob, GlobSyntaxError, isDead, type Position } from './glob.ts';

/**
 * `.terraformignore`, read as Terraform reads it when it uploads a configuration: gitignore-like lines
 * (`#` comments, `!` re-includes, a trailing `/` for directories only, a leading `/` anchors at the
 * root, any other pattern matches at any depth; `*`, `?`, `[…]` within a name and `**` across
 * directories, see glob.ts). The defaults come first, so a file may override them. The last rule that
 * matches a path or one of its directories decides, so a `!` rule can bring back a file inside an
 * excluded directory.
 *
 * Matching walks down the tree with the walk: each rule's automaton is advanced by a directory's name
 * once, not once per file below it, and a rule no longer counts below a directory once a later rule has
 * decided it (the last match wins) or once its automaton can match nothing there.
 */
export interface IgnoreRule {
  glob: Glob;
  negated: boolean;
  directoryOnly: boolean;
  /** The line as written, and its number in .terraformignore (0 for the defaults). */
  text: string;
  line: number;
}

/**
 * `.terraform/` and `.git/` are left out, except `.terraform/modules/`, which the configuration needs.
 * `.git/` comes last so that no default `!` rule reaches inside it: a `.git` directory is never listed
 * (unless the file's own `!` rules reach into it), and one inside `.terraform/modules/` is left out too.
 */
export const DEFAULT_IGNORE = ['.terraform/', '!.terraform/modules/', '.git/'];

function ruleOf(text: string, line: number): IgnoreRule | undefined {
  let pattern = text.trim();
  if (pattern === '' || pattern.startsWith('#')) return undefined;
  const negated = pattern.startsWith('!');
  if (negated) pattern = pattern.slice(1);
  const directoryOnly = pattern.endsWith('/');
  pattern = pattern.replace(/\/+$/, '');
  if (pattern === '') return undefined;
  // As Terraform reads it (not quite .gitignore): only a leading slash anchors a pattern at the root;
  // any other pattern, `modules/x` too, matches at any depth.
  const anchored = pattern.startsWith('/');
  pattern = pattern.replace(/^\/+/, '');
  try {
    return { glob: new Glob(anchored ? pattern : `**/${pattern}`), negated, directoryOnly, text: text.trim(), line };
  } catch (error) {
    if (!(error instanceof GlobSyntaxError)) throw error;
    throw new CliError('usage', `.terraformignore line ${line}: ${JSON.stringify(text.trim())}: ${error.message}`);
  }
}

/** The rules of a .terraformignore (after the defaults); an unreadable pattern is a usage error naming its line. */
export function parseIgnoreFile(content: string): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  DEFAULT_IGNORE.forEach((text) => rules.push(ruleOf(text, 0) as IgnoreRule));
  content.split(/\r?\n/).forEach((text, index) => {
    const rule = ruleOf(text, index + 1);
    if (rule) rules.push(rule);
  });
  return rules;
}

/** Where the rules stand inside a directory. */
export interface DirectoryScope {
  /** Per rule, its automaton after `<directory>/`; DEAD once the rule can no longer change anything below. */
  readonly positions: readonly Position[];
  /** The last rule that matched the directory or one of its ancestors (-1: none): it decides, unless a later one matches below. */
  readonly decidedBy: number;
}

export interface Verdict {
  ignored: boolean;
  /** The rule that decided (-1: none, so included). */
  decidedBy: number;
  /** For a directory, where the rules stand inside it. */
  scope?: DirectoryScope;
}

/** The configuration directory itself: no path yet. */
export function rootScope(rules: readonly IgnoreRule[]): DirectoryScope {
  return { positions: rules.map((rule) => rule.glob.start), decidedBy: -1 };
}

const isIgnoredBy = (rules: readonly IgnoreRule[], decidedBy: number): boolean => decidedBy >= 0 && !rules[decidedBy]?.negated;

/** The verdict on `name` (one path segment) inside `scope`. */
export function judge(rules: readonly IgnoreRule[], scope: DirectoryScope, name: string, isDirectory: boolean): Verdict {
  let decidedBy = scope.decidedBy;
  const inside: Position[] | undefined = isDirectory ? [] : undefined;
  rules.forEach((rule, index) => {
    const from = scope.positions[index] as Position;
    // A rule at or before the deciding one cannot change the verdict, here or below.
    if (index <= scope.decidedBy || isDead(from)) {
      inside?.push(DEAD);
      return;
    }
    const after = rule.glob.advance(from, name);
    if (after.accepting && (isDirectory || !rule.directoryOnly)) decidedBy = index;
    inside?.push(isDirectory ? rule.glob.advance(after, '/') : DEAD);
  });
  const ignored = isIgnoredBy(rules, decidedBy);
  if (!inside) return { ignored, decidedBy };
  return { ignored, decidedBy, scope: { positions: inside.map((position, index) => (index <= decidedBy ? DEAD : position)), decidedBy } };
}

/**
 * For a directory that is left out: the first later `!` rule that could still match something inside
 * it, which is why its contents must be looked at; undefined when nothing inside can come back, so the
 * directory need not be listed at all.
 */
export function reincludeBelow(rules: readonly IgnoreRule[], scope: DirectoryScope): IgnoreRule | undefined {
  return rules.find((rule, index) => index > scope.decidedBy && rule.negated && !isDead(scope.positions[index] as Position));
}

/** Whether `path` (relative, `/`-separated) is left out, judged segment by segment as the walk does. */
export function isIgnored(rules: readonly IgnoreRule[], path: string, isDirectory: boolean): boolean {
  const parts = path.split('/');
  let scope = rootScope(rules);
  for (const [index, part] of parts.entries()) {
    const last = index === parts.length - 1;
    const verdict = judge(rules, scope, part, !last || isDirectory);
    if (last) return verdict.ignored;
    scope = verdict.scope as DirectoryScope;
  }
  return false;
}
