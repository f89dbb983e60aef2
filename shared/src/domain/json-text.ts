/**
 * What a JSON body may hold to be kept as it was sent (docs/limits-and-security.md, "JSON bodies"):
 * well-formed UTF-8, and numbers that both a JavaScript number (every body is parsed into one) and
 * PostgreSQL's numeric (which jsonb stores numbers as) can hold. Pure: the API decides how to answer.
 */

/** Where a body stops being UTF-8: the offset of the first byte of the offending sequence, and why. */
export interface Utf8Problem {
  offset: number;
  reason: string;
}

const isContinuation = (byte: number | undefined): boolean => byte !== undefined && (byte & 0xc0) === 0x80;

/**
 * The first ill-formed sequence in `bytes` by the Unicode standard's table of well-formed UTF-8 (Table
 * 3-7): overlong encodings, UTF-16 surrogates (U+D800–U+DFFF), code points past U+10FFFF, stray
 * continuation bytes and sequences cut short are all refused. A byte order mark is well-formed.
 */
export function firstInvalidUtf8(bytes: Uint8Array): Utf8Problem | null {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i] as number;
    if (lead < 0x80) {
      i += 1;
      continue;
    }
    let length: number;
    // The allowed range of the second byte: narrower than 80–BF exactly where overlong forms, surrogates or
    // code points past U+10FFFF would otherwise be encoded.
    let low = 0x80;
    let high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) length = 2;
    else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
      if (lead === 0xe0) low = 0xa0;
      if (lead === 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
      if (lead === 0xf0) low = 0x90;
      if (lead === 0xf4) high = 0x8f;
    } else {
      const reason =
        lead <= 0xbf
          ? 'a continuation byte without a lead byte'
          : lead <= 0xc1
            ? 'an overlong encoding'
            : 'a byte that never occurs in UTF-8';
      return { offset: i, reason: `${reason} (0x${lead.toString(16).toUpperCase()})` };
    }
    const second = bytes[i + 1];
    if (second === undefined) return { offset: i, reason: 'a sequence cut short by the end of the body' };
    if (second < low || second > high) {
      if (!isContinuation(second)) return { offset: i, reason: 'a sequence cut short' };
      const reason =
        lead === 0xed
          ? 'a UTF-16 surrogate, which UTF-8 never encodes'
          : lead === 0xf4
            ? 'a code point past U+10FFFF'
            : 'an overlong encoding';
      return { offset: i, reason };
    }
    for (let k = 2; k < length; k++) {
      if (i + k >= bytes.length) return { offset: i, reason: 'a sequence cut short by the end of the body' };
      if (!isContinuation(bytes[i + k])) return { offset: i, reason: 'a sequence cut short' };
    }
    i += length;
  }
  return null;
}

/** PostgreSQL's numeric: at most 16383 digits after the decimal point (NUMERIC_DSCALE_MAX). */
export const NUMERIC_MAX_SCALE = 16_383;
/** PostgreSQL refuses exponents from INT_MAX / 2 on, even of a zero. */
const NUMERIC_MAX_EXPONENT = 1_073_741_823;

const NUMBER_PARTS = /^-?\d+(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/** Why a JSON number literal cannot be kept as sent (null where it can). */
export function numberProblem(literal: string): string | null {
  if (!Number.isFinite(Number(literal))) return 'is larger than a 64-bit floating-point number can hold (about ±1.8e308)';
  const parts = NUMBER_PARTS.exec(literal);
  if (!parts) return 'is not a JSON number';
  const fraction = parts[1]?.length ?? 0;
  const exponentText = (parts[2] ?? '0').replace(/^([+-]?)0+(?=\d)/, '$1');
  // Compared as text first: a 200,000-digit exponent is no number at all.
  const exponent = exponentText.replace(/^[+-]/, '').length > 12 ? Number.POSITIVE_INFINITY : Math.abs(Number(exponentText));
  if (exponent >= NUMERIC_MAX_EXPONENT) return 'has an exponent out of the range PostgreSQL numbers take';
  const scale = fraction - (exponentText.startsWith('-') ? -exponent : exponent);
  if (scale > NUMERIC_MAX_SCALE) return `has ${scale} digits after the decimal point; PostgreSQL numbers hold at most ${NUMERIC_MAX_SCALE}`;
  return null;
}

/** An unkeepable number: where it is (a JSON pointer into the document), its first characters, and why. */
export interface NumberProblem {
  pointer: string;
  literal: string;
  reason: string;
}

/**
 * Only a document with a run of 309 digits or a 3-digit exponent can hold an unkeepable number (1e308 and
 * 308-digit integers still fit): the rest, nearly every document, is passed by this one scan.
 */
const MAYBE_UNKEEPABLE = /\d{309}|[eE][+-]?\d{3}/;

const escapePointer = (segment: string): string => segment.replaceAll('~', '~0').replaceAll('/', '~1');

interface Frame {
  array: boolean;
  key: string;
  index: number;
}

const pointerOf = (stack: readonly Frame[]): string =>
  stack.map((frame) => '/' + (frame.array ? String(frame.index) : escapePointer(frame.key))).join('');

/** The end (exclusive) of the string literal whose opening quote is at `start`. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x5c) i += 2;
    else if (c === 0x22) return i + 1;
    else i += 1;
  }
  return text.length;
}

/**
 * The first number in `text`, a document JSON.parse accepted, that `numberProblem` refuses, with the
 * JSON pointer to it. One pass over the text keeping the path to the current value.
 */
export function firstUnkeepableNumber(text: string): NumberProblem | null {
  if (!MAYBE_UNKEEPABLE.test(text)) return null;
  const stack: Frame[] = [];
  let expectingKey = false;
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    const top = stack.at(-1);
    if (c === '{' || c === '[') {
      stack.push({ array: c === '[', key: '', index: 0 });
      expectingKey = c === '{';
      i += 1;
    } else if (c === '}' || c === ']') {
      stack.pop();
      i += 1;
    } else if (c === ',') {
      if (top?.array) top.index += 1;
      else expectingKey = true;
      i += 1;
    } else if (c === '"') {
      const end = stringEnd(text, i);
      if (top && !top.array && expectingKey) {
        top.key = JSON.parse(text.slice(i, end)) as string;
        expectingKey = false;
      }
      i = end;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      let end = i + 1;
      while (end < text.length && /[\d.eE+-]/.test(text[end] as string)) end += 1;
      const literal = text.slice(i, end);
      const reason = numberProblem(literal);
      if (reason) return { pointer: pointerOf(stack), literal: literal.length > 40 ? `${literal.slice(0, 40)}…` : literal, reason };
      i = end;
    } else i += 1;
  }
  return null;
}
