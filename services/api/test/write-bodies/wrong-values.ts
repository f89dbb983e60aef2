import { RUN_STAGES } from '@runtasks/shared/domain';
import fc from 'fast-check';
import { MAX_PLAN_DEPTH } from '../../src/routes/runs.routes.ts';
import { deepObject, type Flavor, FUTURE, type Kind, setAt } from './model.ts';

/** Values each kind of field must refuse (properties 1 (b), 2 and 5). */

// ---------------------------------------------------------------------------------------------
// Wrong values per kind.

// Just past the limit, mostly; the ~100 KB strings are property 1 (a)'s.
export const LONG_EXTRA = 5_000;
export const numbers = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }));
export const plainKey = fc.string({ maxLength: 8 }).filter((key) => key !== '__proto__');
export const objects = fc.dictionary(plainKey, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 });
export const arrays = fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 });
export const extraLength = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 3 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: LONG_EXTRA }) },
);
export const textPiece = fc.oneof(
  fc.constantFrom('a', 'Zz9', '😀', '🚀👍🏽', '中文字', '漢', 'e\u0301', 'a\u0308\u0323', 'ü'),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 3 }),
);
export const namePiece = fc.stringMatching(/^[A-Za-z0-9_-]{1,6}$/);

/** The run tasks' verification endpoint (URL fields must point somewhere that answers). */
export let taskServerUrl = '';
export function setTaskServerUrl(url: string): void {
  taskServerUrl = url;
}

/** A string of exactly `length` code points made of `piece` repeated. */
export function fill(piece: string, length: number): string {
  const points = [...piece];
  return Array.from({ length }, (_, index) => points[index % points.length]).join('');
}

/** Longer than `max`, and otherwise as valid as the flavor allows: only the length is wrong. */
export function overlong(flavor: Flavor, max: number): fc.Arbitrary<string> {
  return fc.tuple(extraLength, flavor === 'name' || flavor === 'id' ? namePiece : textPiece).map(([extra, piece]) => {
    const length = max + 1 + extra;
    switch (flavor) {
      case 'email':
        return 'a'.repeat(length - '@example.test'.length) + '@example.test';
      case 'url': {
        const prefix = `${taskServerUrl}/`;
        return prefix + 'a'.repeat(length - prefix.length);
      }
      case 'version':
        return '1.2.' + '3'.repeat(length - 4);
      default:
        return fill(piece, length);
    }
  });
}

/** A value of the flavor's format with a NUL inside. */
export function withNul(flavor: Flavor): fc.Arbitrary<string> {
  return fc.tuple(fc.stringMatching(/^[a-z0-9]{0,4}$/), fc.stringMatching(/^[a-z0-9]{0,4}$/)).map(([a, b]) => {
    switch (flavor) {
      case 'email':
        return `${a}\u0000${b}@example.test`;
      case 'url':
        return `${taskServerUrl}/${a}\u0000${b}`;
      case 'version':
        return `1.2\u0000.3${a}`;
      default:
        return `${a}\u0000${b}`;
    }
  });
}

export const FORMAT_WRONG: Record<Flavor, string[]> = {
  name: ['has space', 'slash/name', 'ümlaut', 'dot.name', 'tab\tname', 'emoji😀'],
  text: [],
  email: ['not-an-email', 'a@b', 'a @example.test', '@example.test', 'a@'],
  url: ['not a url', 'ftp://127.0.0.1/x', 'javascript:alert(1)', 'http://', 'mailto:a@example.test', '/relative', 'file:///etc/passwd'],
  version: ['1', '1.2', 'v1.2.3', '1.2.3-beta', '1.2.3\n', ' 1.2.3', '１.２.３', '1..3'],
  id: [],
};

/** Strings that are none of `accepted` (the short ones are random, the long one is long). */
export const otherStrings = (accepted: readonly string[]): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ maxLength: 20 }).filter((value) => !accepted.includes(value)),
    overlong('text', 32),
  );

export const wrongValues = new Map<Kind, fc.Arbitrary<unknown>>();
/** Built once per field: building arbitraries is not free. */
export function wrongValue(kind: Kind): fc.Arbitrary<unknown> {
  let arbitrary = wrongValues.get(kind);
  // fast-check's JSON values may carry a `__proto__` key, which the body parser refuses outright (400,
  // property 1 (a) covers it): such a value is a hostile body, not a wrong value for a field.
  if (!arbitrary)
    wrongValues.set(kind, (arbitrary = buildWrongValue(kind).filter((value) => !JSON.stringify(value ?? null).includes('"__proto__"'))));
  return arbitrary;
}

export function buildWrongValue(kind: Kind): fc.Arbitrary<unknown> {
  const common: fc.Arbitrary<unknown>[] = [numbers, arrays];
  const notNull = (nullable: boolean): fc.Arbitrary<unknown>[] => (nullable ? [] : [fc.constant(null)]);
  switch (kind.type) {
    case 'string': {
      const formats = FORMAT_WRONG[kind.flavor].filter((value) => !(kind.flavor === 'name' && value.length > kind.max));
      return fc.oneof(
        ...common,
        fc.boolean(),
        objects,
        ...notNull(kind.nullable),
        // Wrong types are cheap to reject; a length or a NUL is what reaches the database.
        ...(Number.isFinite(kind.max) ? [{ weight: 4, arbitrary: overlong(kind.flavor, kind.max) }] : []),
        { weight: 2, arbitrary: withNul(kind.flavor) },
        ...(kind.nonEmpty ? [fc.constant('')] : []),
        ...(formats.length > 0 ? [fc.constantFrom(...formats)] : []),
      );
    }
    case 'datetime':
      return fc.oneof(
        ...common,
        fc.boolean(),
        objects,
        ...notNull(kind.nullable),
        fc.constantFrom(
          '',
          'tomorrow',
          '2099-01-01',
          '2099-13-01T00:00:00Z',
          '2001-01-01T00:00:00Z',
          '1970-01-01T00:00:00+00:00',
          '2099-01-01 00:00',
        ),
        withNul('text').map((value) => `${FUTURE}${value}`),
        overlong('text', 32),
      );
    case 'boolean':
      return fc.oneof(...common, objects, fc.constant(null), otherStrings(['true', 'false']));
    case 'enum':
      return fc.oneof(...common, fc.boolean(), objects, fc.constant(null), otherStrings(kind.values));
    case 'literal':
      return fc.oneof(...common, fc.boolean(), objects, fc.constant(null), otherStrings([kind.value]));
    case 'object':
      return fc.oneof(
        ...common,
        fc.boolean(),
        ...notNull(kind.nullable),
        otherStrings([]),
        ...(kind.planJson
          ? [
              // jsonb holds no NUL, and JSON.stringify (MikroORM, Koa, the worker) recurses.
              fc.string({ maxLength: 4 }).map((value) => ({ resource_changes: [{ name: `${value}\u0000` }] })),
              fc.string({ maxLength: 4 }).map((value) => setAt({}, ['values', `${value}\u0000`], 1)),
              fc.integer({ min: MAX_PLAN_DEPTH + 1, max: 30_000 }).map(deepObject),
            ]
          : []),
      );
    case 'stages':
      return fc.oneof(
        numbers,
        fc.boolean(),
        objects,
        fc.constant(null),
        otherStrings([]),
        fc.constantFrom(...RUN_STAGES).map((stage) => [stage, stage]),
        otherStrings(RUN_STAGES).map((stage) => ['post_plan', stage]),
        fc.array(fc.oneof(numbers, fc.constant(null), objects), { minLength: 1, maxLength: 3 }),
        ...(kind.nonEmpty ? [fc.constant([])] : []),
      );
    case 'list':
      return fc.oneof(numbers, fc.boolean(), objects, ...notNull(kind.nullable), otherStrings([]));
  }
}
