/**
 * The obvious reading of `.terraformignore`, written apart from cli/src for the property tests to
 * compare against: each pattern as a JavaScript RegExp (which backtracks, so only for short inputs),
 * each path judged by every rule against the path and each of its directories, no walk, no pruning.
 */
export type ReferenceRegex = RegExp | 'invalid';

const hex = (codePoint: number): string => `\\u{${codePoint.toString(16)}}`;

/** Index just past the `]` closing the set opened at `open`, or -1 when it never closes. */
function setEnd(chars: readonly number[], open: number): number {
  let index = open + 1;
  if (chars[index] === 0x21 || chars[index] === 0x5e) index += 1;
  const first = index;
  while (index < chars.length) {
    if (chars[index] === 0x5d && index > first) return index + 1;
    index += chars[index] === 0x5c && index + 1 < chars.length ? 2 : 1;
  }
  return -1;
}

/** The set between `open` and `end` as a RegExp class, or 'invalid' for a backwards range. */
function setRegex(chars: readonly number[], open: number, end: number): string {
  let index = open + 1;
  const negated = chars[index] === 0x21 || chars[index] === 0x5e;
  if (negated) index += 1;
  const members: number[] = [];
  const last = end - 1;
  while (index < last) {
    if (chars[index] === 0x5c && index + 1 < last) index += 1;
    members.push(chars[index] as number);
    index += 1;
    // A `-` between two members (not last before `]`) makes a range.
    if (chars[index] === 0x2d && index + 1 < last) {
      index += 1;
      if (chars[index] === 0x5c && index + 1 < last) index += 1;
      members.push(-1, chars[index] as number);
      index += 1;
    }
  }
  let body = '';
  for (let at = 0; at < members.length; at += 1) {
    const low = members[at] as number;
    if (members[at + 1] === -1) {
      const high = members[at + 2] as number;
      if (high < low) return 'invalid';
      body += `${hex(low)}-${hex(high)}`;
      at += 2;
    } else {
      body += hex(low);
    }
  }
  return `[${negated ? '^' : ''}${body}]`;
}

export function referenceRegex(glob: string): ReferenceRegex {
  const chars = Array.from(glob, (char) => char.codePointAt(0) as number);
  let out = '';
  for (let index = 0; index < chars.length;) {
    const char = chars[index] as number;
    const end = char === 0x5b ? setEnd(chars, index) : -1;
    if (char === 0x2a && chars[index + 1] === 0x2a && chars[index + 2] === 0x2f) {
      out += '(?:[\\s\\S]*/)?';
      index += 3;
    } else if (char === 0x2a && chars[index + 1] === 0x2a) {
      out += '[\\s\\S]*';
      index += 2;
    } else if (char === 0x2a) {
      out += '[^/]*';
      index += 1;
    } else if (char === 0x3f) {
      out += '[^/]';
      index += 1;
    } else if (end !== -1) {
      const set = setRegex(chars, index, end);
      if (set === 'invalid') return 'invalid';
      out += set;
      index = end;
    } else if (char === 0x5c && index + 1 < chars.length) {
      out += hex(chars[index + 1] as number);
      index += 2;
    } else {
      out += hex(char);
      index += 1;
    }
  }
  return new RegExp(`^${out}$`, 'u');
}

interface ReferenceRule {
  regex: RegExp;
  negated: boolean;
  directoryOnly: boolean;
}

export const REFERENCE_DEFAULTS = ['.terraform/', '!.terraform/modules/', '.git/'];

/** The rules of a file after the defaults, or 'invalid' when a pattern cannot be read. */
export function referenceRules(content: string): ReferenceRule[] | 'invalid' {
  const rules: ReferenceRule[] = [];
  for (const raw of [...REFERENCE_DEFAULTS, ...content.split(/\r?\n/)]) {
    let line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negated = line.startsWith('!');
    if (negated) line = line.slice(1);
    const directoryOnly = line.endsWith('/');
    while (line.endsWith('/')) line = line.slice(0, -1);
    if (line === '') continue;
    const anchored = line.startsWith('/');
    while (line.startsWith('/')) line = line.slice(1);
    const regex = referenceRegex(anchored ? line : `**/${line}`);
    if (regex === 'invalid') return 'invalid';
    rules.push({ regex, negated, directoryOnly });
  }
  return rules;
}

/** The last rule matching the path or one of its directories decides. */
export function referenceIsIgnored(rules: readonly ReferenceRule[], path: string, isDirectory: boolean): boolean {
  const parts = path.split('/');
  const candidates = parts.map((_, index) => ({
    path: parts.slice(0, index + 1).join('/'),
    directory: index < parts.length - 1 || isDirectory,
  }));
  let ignored = false;
  for (const rule of rules) {
    if (candidates.some((candidate) => (candidate.directory || !rule.directoryOnly) && rule.regex.test(candidate.path))) {
      ignored = !rule.negated;
    }
  }
  return ignored;
}
