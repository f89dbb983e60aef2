/**
 * `.terraformignore`, read as Terraform reads it when it uploads a configuration: gitignore-like lines
 * (`#` comments, `!` re-includes, a trailing `/` for directories only, a leading `/` anchors at the
 * root, any other pattern matches at any depth; `*`, `?`, `[…]` within a name and `**` across
 * directories). The defaults come first, so a file may override them: `.git/` and `.terraform/` are left
 * out, except `.terraform/modules/`, which the configuration needs. The last rule that matches a path
 * or one of its directories decides, so a `!` rule can bring back a file inside an excluded directory.
 */
export interface IgnoreRule {
  regex: RegExp;
  negated: boolean;
  directoryOnly: boolean;
}

export const DEFAULT_IGNORE = ['.git/', '.terraform/', '!.terraform/modules/'];

/** A glob of `/`-separated segments as an anchored regular expression. */
export function globToRegex(glob: string): RegExp {
  let out = '';
  for (let i = 0; i < glob.length; i += 1) {
    const char = glob[i] as string;
    if (char === '*' && glob[i + 1] === '*') {
      const slashAfter = glob[i + 2] === '/';
      // `**/` is zero or more whole directories; a `**` elsewhere is anything, slashes included.
      out += slashAfter ? '(?:.*/)?' : '.*';
      i += slashAfter ? 2 : 1;
    } else if (char === '*') {
      out += '[^/]*';
    } else if (char === '?') {
      out += '[^/]';
    } else if (char === '[') {
      const end = glob.indexOf(']', i + 2);
      if (end === -1) {
        out += '\\[';
      } else {
        const body = glob
          .slice(i + 1, end)
          .replace(/^!/, '^')
          .replace(/\\/g, '\\\\');
        out += `[${body}]`;
        i = end;
      }
    } else if (char === '\\' && i + 1 < glob.length) {
      out += (glob[i + 1] as string).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
      i += 1;
    } else {
      out += char.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    }
  }
  return new RegExp(`^${out}$`);
}

export function parseIgnoreFile(content: string): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  for (const raw of [...DEFAULT_IGNORE, ...content.split(/\r?\n/)]) {
    let line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negated = line.startsWith('!');
    if (negated) line = line.slice(1);
    const directoryOnly = line.endsWith('/');
    line = line.replace(/\/+$/, '');
    if (line === '') continue;
    // As Terraform reads it (not quite .gitignore): only a leading slash anchors a pattern at the root;
    // any other pattern, `modules/x` too, matches at any depth.
    const anchored = line.startsWith('/');
    line = line.replace(/^\/+/, '');
    rules.push({ regex: globToRegex(anchored ? line : `**/${line}`), negated, directoryOnly });
  }
  return rules;
}

/**
 * Whether `path` (relative, `/`-separated) is left out: the last rule matching the path itself or one of
 * its directories decides.
 */
export function isIgnored(rules: readonly IgnoreRule[], path: string, isDirectory: boolean): boolean {
  const parts = path.split('/');
  const candidates: { path: string; directory: boolean }[] = parts.map((_, index) => ({
    path: parts.slice(0, index + 1).join('/'),
    directory: index < parts.length - 1 || isDirectory,
  }));
  let ignored = false;
  for (const rule of rules) {
    if (candidates.some((candidate) => (!rule.directoryOnly || candidate.directory) && rule.regex.test(candidate.path))) {
      ignored = !rule.negated;
    }
  }
  return ignored;
}

/** Whether a directory's contents may still be included although it is ignored (a `!` rule could reach them). */
export function mayReinclude(rules: readonly IgnoreRule[]): boolean {
  return rules.some((rule) => rule.negated);
}
