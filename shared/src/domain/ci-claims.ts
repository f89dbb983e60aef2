/**
 * Which CI identity tokens a trust rule accepts (docs/sso.md, "Pipelines without a stored secret"):
 * each of its claim patterns must match the token's claim of that name. A pattern is an exact value,
 * or a glob: `*` is any run of characters but `/`, `**` any run at all, `?` one character but `/`.
 */

/** Claims a rule may name, at most this many; each pattern at most 255 characters. */
export const MAX_RULE_CLAIMS = 16;
export const CLAIM_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;
const MAX_PATTERN_LENGTH = 255;

/** Claims the exchange itself checks (issuer, audience, lifetime): a rule may not name them. */
export const RESERVED_CLAIMS: ReadonlySet<string> = new Set(['iss', 'aud', 'exp', 'nbf', 'iat', 'jti']);

const escapeRegExp = (text: string): string => text.replace(/[.+^${}()|[\]\\]/g, '\\$&');

/** The pattern as an anchored regular expression. */
export function globRegExp(pattern: string): RegExp {
  let source = '';
  for (let index = 0; index < pattern.length; index += 1) {
    const char = pattern[index] ?? '';
    if (char === '*' && pattern[index + 1] === '*') {
      source += '.*';
      index += 1;
    } else if (char === '*') source += '[^/]*';
    else if (char === '?') source += '[^/]';
    else source += escapeRegExp(char);
  }
  return new RegExp(`^${source}$`, 's');
}

/** A claim's value as a pattern sees it: strings as they are, numbers and booleans as text, anything else never matches. */
function claimText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}

/** Whether every pattern matches its claim (a missing claim matches nothing). */
export function claimsMatch(patterns: Readonly<Record<string, string>>, claims: Readonly<Record<string, unknown>>): boolean {
  return Object.entries(patterns).every(([name, pattern]) => {
    const value = Object.hasOwn(claims, name) ? claimText(claims[name]) : undefined;
    return value !== undefined && globRegExp(pattern).test(value);
  });
}

/** What is wrong with a rule's claims, each at its key (empty: nothing). */
export function claimPatternProblems(patterns: Readonly<Record<string, unknown>>): { key: string | null; detail: string }[] {
  const entries = Object.entries(patterns);
  if (entries.length === 0)
    return [
      {
        key: null,
        detail: 'must name at least one claim (e.g. repository or project_path): a rule without one trusts every pipeline of the issuer',
      },
    ];
  if (entries.length > MAX_RULE_CLAIMS) return [{ key: null, detail: `may name at most ${MAX_RULE_CLAIMS} claims` }];
  const problems: { key: string | null; detail: string }[] = [];
  for (const [name, pattern] of entries) {
    if (!CLAIM_NAME.test(name)) problems.push({ key: name, detail: 'is not a claim name (letters, digits, _ . : -, at most 64)' });
    else if (RESERVED_CLAIMS.has(name))
      problems.push({ key: name, detail: `is checked by the exchange itself; set issuer or audience instead` });
    else if (typeof pattern !== 'string' || pattern.length === 0 || pattern.length > MAX_PATTERN_LENGTH)
      problems.push({ key: name, detail: `must be a value or glob of 1 to ${MAX_PATTERN_LENGTH} characters` });
    else if (/^[*?/]*$/.test(pattern))
      problems.push({ key: name, detail: 'must name something: a pattern of wildcards alone matches every value' });
  }
  return problems;
}
