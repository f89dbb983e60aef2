/**
 * GitHub Actions' expression language, as much of it as the CI example and action.yml use: literals,
 * context paths (`steps.plan.outcome`), `==`, `!=`, `&&`, `||`, `!`, parentheses and the status
 * functions. Values compare as GitHub compares them (strings case-insensitively; other types as
 * numbers), and `&&`/`||` yield an operand, as in `cond && 'a' || 'b'`.
 */
export type Value = string | number | boolean | null | Record<string, unknown> | unknown[];
export interface ExpressionContext {
  lookup(path: string[]): Value;
  call(name: string): Value;
}

type Token = { kind: 'string' | 'number' | 'name' | 'op'; text: string };

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  const pattern = /\s*(?:'((?:[^']|'')*)'|(\d+(?:\.\d+)?)|([A-Za-z_][\w-]*(?:\.[\w-]+)*)|(==|!=|&&|\|\||!|\(|\)))/y;
  let at = 0;
  while (at < source.length) {
    if (/^\s*$/.test(source.slice(at))) break;
    pattern.lastIndex = at;
    const match = pattern.exec(source);
    if (!match) throw new Error(`cannot read the expression at "${source.slice(at)}"`);
    at = pattern.lastIndex;
    if (match[1] !== undefined) tokens.push({ kind: 'string', text: match[1].replaceAll("''", "'") });
    else if (match[2] !== undefined) tokens.push({ kind: 'number', text: match[2] });
    else if (match[3] !== undefined) tokens.push({ kind: 'name', text: match[3] });
    else tokens.push({ kind: 'op', text: match[4] ?? '' });
  }
  return tokens;
}

const truthy = (value: Value): boolean => !(value === null || value === false || value === 0 || value === '' || Number.isNaN(value));

function toNumber(value: Value): number {
  if (value === null) return 0;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'number') return value;
  if (typeof value === 'string') return value.trim() === '' ? 0 : Number(value);
  return Number.NaN;
}

function equal(a: Value, b: Value): boolean {
  if (typeof a === 'string' && typeof b === 'string') return a.toLowerCase() === b.toLowerCase();
  if (typeof a === typeof b && typeof a !== 'object') return a === b;
  return toNumber(a) === toNumber(b);
}

export function evaluate(source: string, context: ExpressionContext): Value {
  const tokens = tokenize(source);
  let at = 0;
  const peek = (): Token | undefined => tokens[at];
  const take = (text?: string): Token => {
    const token = tokens[at];
    if (!token || (text !== undefined && token.text !== text)) throw new Error(`expected ${text ?? 'a value'} in "${source}"`);
    at += 1;
    return token;
  };
  const primary = (): Value => {
    const token = take();
    if (token.kind === 'string') return token.text;
    if (token.kind === 'number') return Number(token.text);
    if (token.kind === 'op' && token.text === '(') {
      const value = or();
      take(')');
      return value;
    }
    if (token.kind === 'op' && token.text === '!') return !truthy(primary());
    if (token.kind !== 'name') throw new Error(`unexpected "${token.text}" in "${source}"`);
    if (token.text === 'true' || token.text === 'false') return token.text === 'true';
    if (token.text === 'null') return null;
    if (peek()?.text === '(') {
      take('(');
      take(')');
      return context.call(token.text);
    }
    return context.lookup(token.text.split('.'));
  };
  const comparison = (): Value => {
    let left = primary();
    while (peek()?.text === '==' || peek()?.text === '!=') {
      const op = take().text;
      const right = primary();
      left = op === '==' ? equal(left, right) : !equal(left, right);
    }
    return left;
  };
  const and = (): Value => {
    let left = comparison();
    while (peek()?.text === '&&') {
      take();
      const right = comparison();
      left = truthy(left) ? right : left;
    }
    return left;
  };
  const or = (): Value => {
    let left = and();
    while (peek()?.text === '||') {
      take();
      const right = and();
      left = truthy(left) ? left : right;
    }
    return left;
  };
  const value = or();
  if (at !== tokens.length) throw new Error(`unexpected "${tokens[at]?.text}" in "${source}"`);
  return value;
}

export const isTruthy = truthy;

/** `${{ … }}` in a string, each replaced by its value as text. */
export function interpolate(text: string, context: ExpressionContext): string {
  return text.replace(/\$\{\{(.*?)\}\}/gs, (_, expression: string) => {
    const value = evaluate(expression, context);
    return value === null ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
  });
}
