import { describe, expect, it } from '@jest/globals';
import { firstInvalidUtf8, firstUnkeepableNumber, numberProblem } from './json-text.ts';

const bytes = (...values: number[]): Uint8Array => Uint8Array.from(values);

describe('firstInvalidUtf8', () => {
  const cases: { name: string; input: Uint8Array; offset: number | null; reason?: RegExp }[] = [
    { name: 'ASCII', input: new TextEncoder().encode('{"a":1}'), offset: null },
    { name: 'two, three and four byte characters', input: new TextEncoder().encode('é€😀'), offset: null },
    { name: 'a byte order mark', input: bytes(0xef, 0xbb, 0xbf, 0x7b, 0x7d), offset: null },
    { name: 'the largest code point, U+10FFFF', input: bytes(0xf4, 0x8f, 0xbf, 0xbf), offset: null },
    { name: 'U+D7FF and U+E000, either side of the surrogates', input: bytes(0xed, 0x9f, 0xbf, 0xee, 0x80, 0x80), offset: null },
    { name: 'a stray continuation byte', input: bytes(0x41, 0x80), offset: 1, reason: /continuation byte without a lead/ },
    { name: 'a two-byte overlong "/" (C0 AF)', input: bytes(0x22, 0xc0, 0xaf), offset: 1, reason: /overlong/ },
    { name: 'a two-byte overlong with C1', input: bytes(0xc1, 0xbf), offset: 0, reason: /overlong/ },
    { name: 'a three-byte overlong (E0 80 AF)', input: bytes(0x61, 0x62, 0xe0, 0x80, 0xaf), offset: 2, reason: /overlong/ },
    { name: 'a four-byte overlong (F0 80 80 AF)', input: bytes(0xf0, 0x80, 0x80, 0xaf), offset: 0, reason: /overlong/ },
    { name: 'a high surrogate (ED A0 80)', input: bytes(0x20, 0xed, 0xa0, 0x80), offset: 1, reason: /surrogate/ },
    { name: 'a low surrogate (ED BF BF)', input: bytes(0xed, 0xbf, 0xbf), offset: 0, reason: /surrogate/ },
    { name: 'a code point past U+10FFFF (F4 90 80 80)', input: bytes(0xf4, 0x90, 0x80, 0x80), offset: 0, reason: /past U\+10FFFF/ },
    { name: 'a lead byte F5', input: bytes(0xf5, 0x80, 0x80, 0x80), offset: 0, reason: /never occurs/ },
    { name: 'FF', input: bytes(0x7b, 0xff), offset: 1, reason: /never occurs/ },
    { name: 'a three-byte sequence cut by the end', input: bytes(0x22, 0xe2, 0x82), offset: 1, reason: /end of the body/ },
    { name: 'a lead byte at the very end', input: bytes(0x22, 0xc3), offset: 1, reason: /end of the body/ },
    { name: 'a three-byte sequence cut by ASCII', input: bytes(0xe2, 0x82, 0x41), offset: 0, reason: /cut short/ },
    { name: 'a two-byte sequence cut by ASCII', input: bytes(0xc3, 0x41), offset: 0, reason: /cut short/ },
    { name: 'a four-byte sequence cut after three', input: bytes(0xf0, 0x9f, 0x98, 0x22), offset: 0, reason: /cut short/ },
  ];
  it.each(cases)('$name', ({ input, offset, reason }) => {
    const problem = firstInvalidUtf8(input);
    expect(problem?.offset ?? null).toBe(offset);
    if (reason) expect(problem?.reason).toMatch(reason);
    // Agrees with the platform's strict decoder on whether the bytes are UTF-8 at all.
    const strict = (() => {
      try {
        new TextDecoder('utf-8', { fatal: true }).decode(input);
        return true;
      } catch {
        return false;
      }
    })();
    expect(strict).toBe(offset === null);
  });
});

describe('numberProblem', () => {
  const cases: { literal: string; refused: RegExp | null }[] = [
    { literal: '0', refused: null },
    { literal: '-12.5e3', refused: null },
    { literal: '1e308', refused: null },
    { literal: '1.7976931348623157e308', refused: null },
    { literal: '1e309', refused: /64-bit/ },
    { literal: '-1e309', refused: /64-bit/ },
    { literal: '1e1000000', refused: /64-bit/ },
    { literal: '9'.repeat(200_000), refused: /64-bit/ },
    { literal: '1e-400', refused: null },
    { literal: '1e-16383', refused: null },
    { literal: '1e-16384', refused: /16384 digits after the decimal point/ },
    { literal: '0e-16384', refused: /16384 digits/ },
    { literal: '0.5e-16383', refused: /16384 digits/ },
    { literal: '1.5e-16382', refused: null },
    { literal: `0.${'0'.repeat(16_382)}1`, refused: null },
    { literal: `0.${'0'.repeat(16_383)}1`, refused: /16384 digits/ },
    { literal: '0e999999', refused: null },
    { literal: '0e1073741823', refused: /exponent/ },
    { literal: `1e-${'9'.repeat(200_000)}`, refused: /exponent/ },
    { literal: '1e-0000000000000000000000005', refused: null },
  ];
  const named = cases.map((item) => ({
    ...item,
    name: item.literal.length > 30 ? `${item.literal.slice(0, 20)}… (${item.literal.length} characters)` : item.literal,
  }));
  it.each(named)('$name', ({ literal, refused }) => {
    const problem = numberProblem(literal);
    if (refused === null) expect(problem).toBeNull();
    else expect(problem).toMatch(refused);
  });
});

describe('firstUnkeepableNumber', () => {
  const cases: { name: string; text: string; pointer: string | null }[] = [
    { name: 'ordinary numbers', text: '{"a":[1,2.5,-3e10],"b":{"c":1e308}}', pointer: null },
    { name: 'a huge number at the root', text: '1e1000000', pointer: '' },
    { name: 'in an object', text: '{"a":1,"b":1e400}', pointer: '/b' },
    { name: 'in an array, after other values', text: '{"a":[1,"x",{"y":2},null,1e999]}', pointer: '/a/4' },
    { name: 'deep, after a closed sibling', text: '{"a":{"b":[1]},"c":{"d":[0,{"e":-1e999}]}}', pointer: '/c/d/1/e' },
    { name: 'keys needing escapes', text: '{"a/b":{"m~n":{"q\\"r":1e-20000}}}', pointer: '/a~1b/m~0n/q"r' },
    { name: 'digits inside strings only', text: `{"e999":"1e999","s":"${'9'.repeat(400)}"}`, pointer: null },
    { name: 'a key with a colon and comma', text: '{"a,b:c":[1,{"x":2}],"z":1e999}', pointer: '/z' },
    { name: 'a 200,000-digit integer', text: `{"values":{"n":${'1'.repeat(200_000)}}}`, pointer: '/values/n' },
  ];
  it.each(cases)('$name', ({ text, pointer }) => {
    JSON.parse(text);
    expect(firstUnkeepableNumber(text)?.pointer ?? null).toBe(pointer);
  });

  it('shortens a long literal in what it reports', () => {
    const problem = firstUnkeepableNumber(`[${'7'.repeat(1000)}]`);
    expect(problem?.literal).toBe(`${'7'.repeat(40)}…`);
  });
});
