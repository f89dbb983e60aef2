import fc from 'fast-check';
import { EventEmitter } from 'node:events';
import { JSON_API } from '../../../../test/support/fixtures.ts';
import { type Response } from '../../../../test/support/assertions.ts';
import { Raw } from '../../../../test/support/raw-json.ts';
import { deepArray, deepObject, type Kind, type Op, segmentsOf, setAt, type WriteSpec } from './model.ts';
import { wrongValue } from './wrong-values.ts';

/** Hostile bodies (property 1 (a)), faults of one field, and the checks every response must pass. */

// ---------------------------------------------------------------------------------------------
// Hostile values for property 1 (a).

export const PROTO_DOCUMENTS = [
  '{"__proto__":{"polluted":"yes"}}',
  '{"constructor":{"prototype":{"polluted":"yes"}}}',
  '{"prototype":{"polluted":"yes"}}',
  '{"a":{"__proto__":{"polluted":"yes"}}}',
  '{"__proto__":{"__proto__":{"polluted":"yes"}},"constructor":{"polluted":"yes"}}',
  '{"constructor":{"name":"x","prototype":null},"hasOwnProperty":1,"toString":"x","valueOf":[]}',
  '[{"__proto__":{"polluted":"yes"}},{"constructor":{"prototype":{"polluted":"yes"}}}]',
];
export const SPECIAL_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'hasOwnProperty',
  'toString',
  'valueOf',
  'toJSON',
  'then',
  '__defineGetter__',
];
/** Invalid UTF-8: a lone continuation byte, a truncated sequence, a surrogate, overlong forms, > U+10FFFF, 0xFF. */
export const BAD_UTF8 = [
  [0x80],
  [0xc3],
  [0xe2, 0x82],
  [0xed, 0xa0, 0x80],
  [0xc0, 0xaf],
  [0xe0, 0x80, 0xaf],
  [0xf4, 0x90, 0x80, 0x80],
  [0xff],
  [0xfe, 0xff],
];

export const hugeString = fc
  .tuple(fc.string({ unit: 'binary', minLength: 1, maxLength: 6 }), fc.integer({ min: 1, max: 100_000 }))
  .map(([piece, length]) => piece.repeat(Math.ceil(length / piece.length)).slice(0, length));
export const nulString = fc.tuple(fc.string(), fc.string()).map(([a, b]) => `${a}\u0000${b}`);
export const protoValue = fc.constantFrom(...PROTO_DOCUMENTS).map((text) => JSON.parse(text) as unknown);
export const specialKey = fc.oneof(fc.constantFrom(...SPECIAL_KEYS), fc.string(), fc.string({ unit: 'binary', maxLength: 6 }), nulString);
export const specialKeyObject = fc.tuple(specialKey, fc.jsonValue({ maxDepth: 2 })).map(([key, value]) => setAt({}, [key], value));
export const deepValue = fc.oneof(fc.integer({ min: 1, max: 100_000 }).map(deepArray), fc.integer({ min: 1, max: 30_000 }).map(deepObject));
export const badUtf8String = fc
  .tuple(fc.string({ maxLength: 5 }), fc.constantFrom(...BAD_UTF8), fc.string({ maxLength: 5 }))
  .map(
    ([a, bytes, b]) =>
      new Raw(Buffer.concat([Buffer.from(JSON.stringify(a).slice(0, -1)), Buffer.from(bytes), Buffer.from(JSON.stringify(b).slice(1))])),
  );
export const badUtf8Token = fc.constantFrom(...BAD_UTF8).map((bytes) => new Raw(Buffer.from(bytes)));

export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue(),
  fc.jsonValue({ maxDepth: 6 }),
  hugeString,
  nulString,
  protoValue,
  specialKeyObject,
  deepValue,
  badUtf8String,
  badUtf8Token,
  fc.array(fc.oneof(hugeString, nulString, protoValue, badUtf8String), { minLength: 1, maxLength: 3 }),
);

export function hostileOps(spec: WriteSpec): fc.Arbitrary<Op[]> {
  const attributes = segmentsOf(spec.attributes);
  const fields = Object.keys(spec.fields);
  return fc.oneof(
    hostileValue.map((value): Op[] => [{ op: 'root', value }]),
    // A route without known fields (a body-less action) has only the root and unknown keys to attack.
    ...(fields.length > 0
      ? [
          fc
            .tuple(fc.constantFrom(...fields), hostileValue)
            .map(([pointer, value]): Op[] => [{ op: 'set', path: segmentsOf(pointer), value }]),
        ]
      : []),
    fc
      .array(fc.tuple(specialKey, hostileValue), { minLength: 1, maxLength: 3 })
      .map((entries): Op[] => entries.map(([key, value]) => ({ op: 'set', path: [...attributes, key], value }))),
  );
}

/** One known field wrong (or one required field missing), with the pointer the 422 must name. */
export interface Fault {
  op: Op;
  pointer: string;
  kind: Kind | null;
}

export function faults(spec: WriteSpec): fc.Arbitrary<Fault> {
  // Without known fields, the one wrong thing is the document itself: a list where an object (or nothing) belongs.
  if (Object.keys(spec.fields).length === 0) {
    return fc
      .constantFrom<unknown[]>([], [1], ['text', {}])
      .map((value): Fault => ({ op: { op: 'root', value }, pointer: '', kind: null }));
  }
  const wrong = fc
    .constantFrom(...Object.entries(spec.fields))
    .chain(([pointer, kind]) =>
      wrongValue(kind).map((value): Fault => ({ op: { op: 'set', path: segmentsOf(pointer), value }, pointer, kind })),
    );
  if (spec.required.length === 0) return wrong;
  const drop = fc
    .constantFrom(...spec.required)
    .map((pointer): Fault => ({ op: { op: 'drop', path: segmentsOf(pointer) }, pointer, kind: null }));
  return fc.oneof({ weight: 4, arbitrary: wrong }, { weight: 1, arbitrary: drop });
}

// ---------------------------------------------------------------------------------------------
// Responses and global state.

export const OUTER_OBJECT_PROTOTYPE = Object.getPrototypeOf(EventEmitter.prototype) as object;
export const PROTOTYPES: [string, object][] = [
  ['Object.prototype', Object.prototype],
  ["Node's Object.prototype", OUTER_OBJECT_PROTOTYPE],
];

export function prototypeSnapshot(prototype: object): Map<string | symbol, unknown> {
  const keys = [...Object.getOwnPropertyNames(prototype), ...Object.getOwnPropertySymbols(prototype)];
  return new Map(
    keys.map((key) => {
      const descriptor = Object.getOwnPropertyDescriptor(prototype, key);
      return [key, descriptor?.value ?? descriptor?.get];
    }),
  );
}
export const PROTOTYPES_BEFORE = PROTOTYPES.map(([, prototype]) => prototypeSnapshot(prototype));

export function expectPrototypesUntouched(context: string): void {
  PROTOTYPES.forEach(([label, prototype], index) => {
    const before = PROTOTYPES_BEFORE[index] as Map<string | symbol, unknown>;
    const after = prototypeSnapshot(prototype);
    const changed = [...new Set([...before.keys(), ...after.keys()])].filter((key) => !Object.is(before.get(key), after.get(key)));
    if (changed.length > 0) throw new Error(`${context}: ${label} changed: ${changed.map(String).join(', ')}`);
    if ((Object.create(prototype) as Record<string, unknown>)['polluted'] !== undefined) throw new Error(`${context}: ${label} polluted`);
  });
  if (({} as Record<string, unknown>)['polluted'] !== undefined) throw new Error(`${context}: ({}).polluted is defined`);
}

export const describeResponse = (res: Response): string => `${res.status} ${res.text.slice(0, 300)}`;

/** < 500; a 4xx is a JSON:API error document; the prototypes are untouched. */
export function expectSane(context: string, res: Response): void {
  if (res.status >= 500) throw new Error(`${context} → ${describeResponse(res)}`);
  if (res.status >= 400) {
    const errors = (res.body as { errors?: unknown }).errors;
    const first = Array.isArray(errors) ? (errors[0] as Record<string, unknown> | undefined) : undefined;
    if (
      !String(res.headers['content-type']).includes(JSON_API) ||
      !first ||
      first['status'] !== String(res.status) ||
      typeof first['title'] !== 'string'
    ) {
      throw new Error(`${context}: not a JSON:API error document: ${res.headers['content-type']} ${describeResponse(res)}`);
    }
  }
  expectPrototypesUntouched(context);
}
