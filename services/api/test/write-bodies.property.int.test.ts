import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  EDITIONS,
  ENFORCEMENT_LEVELS,
  newId,
  RUN_STAGES,
  TEAM_RUNS_ACCESS,
  TEAM_WORKSPACE_ACCESS,
  type RunStatus,
} from '@runtasks/shared/domain';
import { Organization, Run, RunTask, TaskResult, TaskStage, Workspace } from '@runtasks/shared/db';
import { CALLBACK_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type OutgoingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ROUTES } from '../src/routes/index.ts';
import type { RouteDef } from '../src/routes/define.ts';
import { MAX_PLAN_DEPTH } from '../src/routes/runs.routes.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import {
  api,
  createOrganization,
  createOrganizationToken,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  JSON_API,
} from '../../../test/support/fixtures.ts';
import { uniqueName, type Response } from '../../../test/support/assertions.ts';
import { encode, Raw } from '../../../test/support/raw-json.ts';

/**
 * Property-based tests over the request body of every write route (POST, PATCH, PUT in ROUTES):
 *
 * 1. No 5xx, ever: (a) for hostile bodies (arbitrary JSON, deep nesting, ~100 KB strings,
 *    __proto__/constructor/prototype keys, invalid UTF-8, NUL) and (b) for mutations of a valid
 *    document (a required field dropped, known fields set to wrong values). Every 4xx is a JSON:API
 *    error document, and no request adds to or changes Object.prototype.
 * 2. One wrong (or missing) known field → 422 whose pointer names that field.
 * 3. A run task description is counted in code points: 300 are accepted, 301 are not.
 * 4. Unknown attributes are ignored: a valid document with extra attributes still succeeds.
 * 5. Failed writes change nothing in the database.
 * 6. The upload route (`body: 'raw'`) takes bytes, not JSON: arbitrary bytes and content types to a
 *    fresh upload URL never give a 5xx, and only a real .tar.gz makes the version `uploaded`.
 *
 * Every JSON route is described by a WriteSpec below, every raw route by an entry of RAW_ROUTES; a
 * write route without either fails the first test.
 */

// ---------------------------------------------------------------------------------------------
// Bodies: JSON values, plus Raw fragments spliced in verbatim by `encode` (test/support/raw-json.ts).

/** `depth` nested objects (the outermost is level 1) around the number 1. */
const deepObject = (depth: number): Raw => new Raw('{"a":'.repeat(depth) + '1' + '}'.repeat(depth));
const deepArray = (depth: number): Raw => new Raw('['.repeat(depth) + '1' + ']'.repeat(depth));

type Segments = readonly string[];
const segmentsOf = (pointer: string): string[] => (pointer === '' ? [] : pointer.slice(1).split('/'));
const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
/** An object or array to descend into (a Raw fragment is a leaf). */
const isContainer = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !(value instanceof Raw);

/** Sets an own property (even `__proto__`), creating missing parents. */
function setAt(document: unknown, path: Segments, value: unknown): unknown {
  if (path.length === 0) return value;
  const root = isRecord(document) ? document : {};
  let node: Record<string, unknown> = root;
  path.forEach((key, index) => {
    if (index === path.length - 1) {
      Object.defineProperty(node, key, { value, enumerable: true, writable: true, configurable: true });
      return;
    }
    const child = Object.hasOwn(node, key) ? node[key] : undefined;
    const next = isContainer(child) ? child : {};
    if (next !== child) Object.defineProperty(node, key, { value: next, enumerable: true, writable: true, configurable: true });
    node = next;
  });
  return root;
}

function dropAt(document: unknown, path: Segments): unknown {
  let node = document;
  // Through arrays too: a member of a list's item (`/data/0/id`) can be required.
  for (const key of path.slice(0, -1)) node = isContainer(node) && Object.hasOwn(node, key) ? node[key] : undefined;
  if (isRecord(node)) delete node[path[path.length - 1] as string];
  return document;
}

type Op = { op: 'root'; value: unknown } | { op: 'set'; path: Segments; value: unknown } | { op: 'drop'; path: Segments };

/** A copy that keeps own `__proto__` keys and Raw fragments (generated values are shallow). */
function copy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copy);
  if (!isContainer(value)) return value;
  return Object.keys(value).reduce<unknown>((result, key) => setAt(result, [key], copy(value[key])), {});
}

/** Applies the operations to a copy of `base`; generated values are copied too, never changed in place. */
function applyOps(base: unknown, ops: readonly Op[]): unknown {
  let body = copy(base);
  for (const op of ops) {
    if (op.op === 'root') body = copy(op.value);
    else if (op.op === 'set') body = setAt(body, op.path, copy(op.value));
    else body = dropAt(body, op.path);
  }
  return body;
}

// ---------------------------------------------------------------------------------------------
// The model of every known field: what it accepts, so the test can produce values it must refuse.

type Flavor = 'name' | 'text' | 'email' | 'url' | 'version' | 'id';
/** String lengths are counted in code points (zod here, and PostgreSQL varchar, count characters). */
type Kind =
  | { type: 'string'; flavor: Flavor; max: number; nullable: boolean; nonEmpty: boolean }
  | { type: 'datetime'; nullable: boolean }
  | { type: 'boolean' }
  | { type: 'enum'; values: readonly string[] }
  | { type: 'literal'; value: string }
  | { type: 'object'; nullable: boolean; planJson?: boolean }
  | { type: 'stages'; nonEmpty: boolean }
  | { type: 'list'; nullable: boolean };

const str = (flavor: Flavor, max: number, options: { nullable?: boolean; nonEmpty?: boolean } = {}): Kind => ({
  type: 'string',
  flavor,
  max,
  nullable: options.nullable ?? false,
  nonEmpty: options.nonEmpty ?? flavor === 'name',
});
const bool: Kind = { type: 'boolean' };
const oneOf = (values: readonly string[]): Kind => ({ type: 'enum', values });
const literal = (value: string): Kind => ({ type: 'literal', value });
const object = (nullable = false): Kind => ({ type: 'object', nullable });
const datetime = (nullable: boolean): Kind => ({ type: 'datetime', nullable });
const stages = (nonEmpty: boolean): Kind => ({ type: 'stages', nonEmpty });
const list = (nullable = false): Kind => ({ type: 'list', nullable });

interface Request {
  path: string;
  body: unknown;
  /** The bearer token, when not the admin token. */
  token?: string;
}

interface WriteSpec {
  /** Pointer of the object that holds the attributes: '/data/attributes', or '' for plain JSON bodies. */
  attributes: string;
  /** Every known field (pointer → kind); each can be set on `base` independently of the others. */
  fields: Record<string, Kind>;
  /** Pointers whose absence alone is a 422 at that pointer. */
  required: string[];
  /** The status of a successful write. */
  success: number;
  /** A valid document on existing resources, with every known field present; only ever sent mutated. */
  base(): Promise<Request>;
  /** A request that succeeds now (creates what it needs first). */
  fresh(): Promise<Request>;
  /** Well-formed requests that must fail for reasons beyond the schema (conflicts, lookups, verification). */
  failures: (() => Promise<Request>)[];
  /** Where the 422 for a field may also be reported (the member of a union that holds it). */
  reportedAt?: (pointer: string) => string;
}

const attributeFields = (prefix: string, fields: Record<string, Kind>): Record<string, Kind> =>
  Object.fromEntries(Object.entries(fields).map(([name, kind]) => [name === '' ? prefix : `${prefix}/${name}`, kind]));

function resourceFields(type: string, attributes: Record<string, Kind>, relationships: Record<string, Kind> = {}): Record<string, Kind> {
  return {
    '/data': object(),
    '/data/type': literal(type),
    '/data/attributes': object(),
    ...attributeFields('/data/attributes', attributes),
    ...attributeFields('/data/relationships', relationships),
  };
}

function relationshipFields(name: string, type: string, options: { max?: number; nullable?: boolean; nonEmpty?: boolean } = {}) {
  return {
    [name]: object(),
    [`${name}/data`]: object(options.nullable ?? false),
    [`${name}/data/type`]: literal(type),
    [`${name}/data/id`]: str('id', options.max ?? 64, { nonEmpty: options.nonEmpty ?? true }),
  };
}

const relationshipRequired = (name: string): string[] => [
  '/data/relationships',
  `/data/relationships/${name}`,
  `/data/relationships/${name}/data`,
  `/data/relationships/${name}/data/type`,
  `/data/relationships/${name}/data/id`,
];

const FUTURE = '2099-01-01T00:00:00Z';

// ---------------------------------------------------------------------------------------------
// Wrong values per kind.

// Just past the limit, mostly; the ~100 KB strings are property 1 (a)'s.
const LONG_EXTRA = 5_000;
const numbers = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }));
const plainKey = fc.string({ maxLength: 8 }).filter((key) => key !== '__proto__');
const objects = fc.dictionary(plainKey, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 });
const arrays = fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 });
const extraLength = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 3 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: LONG_EXTRA }) },
);
const textPiece = fc.oneof(
  fc.constantFrom('a', 'Zz9', '😀', '🚀👍🏽', '中文字', '漢', 'e\u0301', 'a\u0308\u0323', 'ü'),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 3 }),
);
const namePiece = fc.stringMatching(/^[A-Za-z0-9_-]{1,6}$/);

let taskServerUrl = '';

/** A string of exactly `length` code points made of `piece` repeated. */
function fill(piece: string, length: number): string {
  const points = [...piece];
  return Array.from({ length }, (_, index) => points[index % points.length]).join('');
}

/** Longer than `max`, and otherwise as valid as the flavor allows: only the length is wrong. */
function overlong(flavor: Flavor, max: number): fc.Arbitrary<string> {
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
function withNul(flavor: Flavor): fc.Arbitrary<string> {
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

const FORMAT_WRONG: Record<Flavor, string[]> = {
  name: ['has space', 'slash/name', 'ümlaut', 'dot.name', 'tab\tname', 'emoji😀'],
  text: [],
  email: ['not-an-email', 'a@b', 'a @example.test', '@example.test', 'a@'],
  url: ['not a url', 'ftp://127.0.0.1/x', 'javascript:alert(1)', 'http://', 'mailto:a@example.test', '/relative', 'file:///etc/passwd'],
  version: ['1', '1.2', 'v1.2.3', '1.2.3-beta', '1.2.3\n', ' 1.2.3', '１.２.３', '1..3'],
  id: [],
};

/** Strings that are none of `accepted` (the short ones are random, the long one is long). */
const otherStrings = (accepted: readonly string[]): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ maxLength: 20 }).filter((value) => !accepted.includes(value)),
    overlong('text', 32),
  );

const wrongValues = new Map<Kind, fc.Arbitrary<unknown>>();
/** Built once per field: building arbitraries is not free. */
function wrongValue(kind: Kind): fc.Arbitrary<unknown> {
  let arbitrary = wrongValues.get(kind);
  // fast-check's JSON values may carry a `__proto__` key, which the body parser refuses outright (400,
  // property 1 (a) covers it): such a value is a hostile body, not a wrong value for a field.
  if (!arbitrary)
    wrongValues.set(kind, (arbitrary = buildWrongValue(kind).filter((value) => !JSON.stringify(value ?? null).includes('"__proto__"'))));
  return arbitrary;
}

function buildWrongValue(kind: Kind): fc.Arbitrary<unknown> {
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

// ---------------------------------------------------------------------------------------------
// Hostile values for property 1 (a).

const PROTO_DOCUMENTS = [
  '{"__proto__":{"polluted":"yes"}}',
  '{"constructor":{"prototype":{"polluted":"yes"}}}',
  '{"prototype":{"polluted":"yes"}}',
  '{"a":{"__proto__":{"polluted":"yes"}}}',
  '{"__proto__":{"__proto__":{"polluted":"yes"}},"constructor":{"polluted":"yes"}}',
  '{"constructor":{"name":"x","prototype":null},"hasOwnProperty":1,"toString":"x","valueOf":[]}',
  '[{"__proto__":{"polluted":"yes"}},{"constructor":{"prototype":{"polluted":"yes"}}}]',
];
const SPECIAL_KEYS = [
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
const BAD_UTF8 = [
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

const hugeString = fc
  .tuple(fc.string({ unit: 'binary', minLength: 1, maxLength: 6 }), fc.integer({ min: 1, max: 100_000 }))
  .map(([piece, length]) => piece.repeat(Math.ceil(length / piece.length)).slice(0, length));
const nulString = fc.tuple(fc.string(), fc.string()).map(([a, b]) => `${a}\u0000${b}`);
const protoValue = fc.constantFrom(...PROTO_DOCUMENTS).map((text) => JSON.parse(text) as unknown);
const specialKey = fc.oneof(fc.constantFrom(...SPECIAL_KEYS), fc.string(), fc.string({ unit: 'binary', maxLength: 6 }), nulString);
const specialKeyObject = fc.tuple(specialKey, fc.jsonValue({ maxDepth: 2 })).map(([key, value]) => setAt({}, [key], value));
const deepValue = fc.oneof(fc.integer({ min: 1, max: 100_000 }).map(deepArray), fc.integer({ min: 1, max: 30_000 }).map(deepObject));
const badUtf8String = fc
  .tuple(fc.string({ maxLength: 5 }), fc.constantFrom(...BAD_UTF8), fc.string({ maxLength: 5 }))
  .map(
    ([a, bytes, b]) =>
      new Raw(Buffer.concat([Buffer.from(JSON.stringify(a).slice(0, -1)), Buffer.from(bytes), Buffer.from(JSON.stringify(b).slice(1))])),
  );
const badUtf8Token = fc.constantFrom(...BAD_UTF8).map((bytes) => new Raw(Buffer.from(bytes)));

const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
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

function hostileOps(spec: WriteSpec): fc.Arbitrary<Op[]> {
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
interface Fault {
  op: Op;
  pointer: string;
  kind: Kind | null;
}

function faults(spec: WriteSpec): fc.Arbitrary<Fault> {
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

const OUTER_OBJECT_PROTOTYPE = Object.getPrototypeOf(EventEmitter.prototype) as object;
const PROTOTYPES: [string, object][] = [
  ['Object.prototype', Object.prototype],
  ["Node's Object.prototype", OUTER_OBJECT_PROTOTYPE],
];

function prototypeSnapshot(prototype: object): Map<string | symbol, unknown> {
  const keys = [...Object.getOwnPropertyNames(prototype), ...Object.getOwnPropertySymbols(prototype)];
  return new Map(
    keys.map((key) => {
      const descriptor = Object.getOwnPropertyDescriptor(prototype, key);
      return [key, descriptor?.value ?? descriptor?.get];
    }),
  );
}
const PROTOTYPES_BEFORE = PROTOTYPES.map(([, prototype]) => prototypeSnapshot(prototype));

function expectPrototypesUntouched(context: string): void {
  PROTOTYPES.forEach(([label, prototype], index) => {
    const before = PROTOTYPES_BEFORE[index] as Map<string | symbol, unknown>;
    const after = prototypeSnapshot(prototype);
    const changed = [...new Set([...before.keys(), ...after.keys()])].filter((key) => !Object.is(before.get(key), after.get(key)));
    if (changed.length > 0) throw new Error(`${context}: ${label} changed: ${changed.map(String).join(', ')}`);
    if ((Object.create(prototype) as Record<string, unknown>)['polluted'] !== undefined) throw new Error(`${context}: ${label} polluted`);
  });
  if (({} as Record<string, unknown>)['polluted'] !== undefined) throw new Error(`${context}: ({}).polluted is defined`);
}

const describeResponse = (res: Response): string => `${res.status} ${res.text.slice(0, 300)}`;

/** < 500; a 4xx is a JSON:API error document; the prototypes are untouched. */
function expectSane(context: string, res: Response): void {
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

// ---------------------------------------------------------------------------------------------
// Bytes for property 6 (the raw upload route).

/** CONFIGURATION_VERSION_MAX_BYTES of this file's API: small, so property 6's buffers (up to 64 KiB) often exceed it. */
const MAX_UPLOAD_BYTES = 16 * 1024;
/** PLAN_JSON_MAX_BYTES of this file's API: small, so property 7's padded plans often exceed it. */
const MAX_PLAN_REPORT_BYTES = 8 * 1024;

/** Deterministic noise (xorshift32): fast-check draws a seed and a length, not 64 Ki separate values. */
function noiseOf(seed: number, length: number): Buffer {
  const bytes = Buffer.alloc(length);
  let state = seed >>> 0 || 0x9e3779b9;
  for (let index = 0; index < length; index += 1) {
    state = (state ^ (state << 13)) >>> 0;
    state = (state ^ (state >>> 17)) >>> 0;
    state = (state ^ (state << 5)) >>> 0;
    bytes[index] = state & 0xff;
  }
  return bytes;
}

/** A real .tar.gz made by the system's tar: main.tf, and optionally a file of incompressible bytes. */
function tarGz(mainTf: string, extra: Buffer | null = null): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'runtasks-upload-'));
  try {
    writeFileSync(join(dir, 'main.tf'), mainTf);
    if (extra) writeFileSync(join(dir, 'blob.bin'), extra);
    return execFileSync('tar', ['-czf', '-', '-C', dir, 'main.tf', ...(extra ? ['blob.bin'] : [])]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The oracle for "a real tar.gz": the system's tar lists it without complaint. */
function tarLists(bytes: Buffer): boolean {
  try {
    execFileSync('tar', ['-tzf', '-'], { input: bytes, stdio: ['pipe', 'ignore', 'ignore'] });
    return true;
  } catch {
    return false;
  }
}

interface Upload {
  kind: string;
  bytes: Buffer;
  /** Made by tar -czf and left alone: must be accepted when within the limit. */
  real: boolean;
}
const GZIP_MAGIC = Buffer.from([0x1f, 0x8b]);
const UPLOAD_SAMPLE_MAX = 64 * 1024;
const uploadLength = fc.oneof(
  fc.integer({ min: 0, max: 600 }),
  fc.integer({ min: 0, max: UPLOAD_SAMPLE_MAX }),
  fc.constantFrom(MAX_UPLOAD_BYTES - 1, MAX_UPLOAD_BYTES, MAX_UPLOAD_BYTES + 1),
);
const noise = fc.tuple(fc.integer(), uploadLength).map(([seed, length]) => noiseOf(seed, length));
const realArchive = fc
  .tuple(fc.string({ unit: 'grapheme', maxLength: 200 }), fc.option(fc.tuple(fc.integer(), fc.integer({ min: 1, max: 24 * 1024 }))))
  .map(([main, extra]) => tarGz(main, extra ? noiseOf(...extra) : null));
const uploads: fc.Arbitrary<Upload> = fc.oneof(
  noise.map((bytes) => ({ kind: 'random bytes', bytes, real: false })),
  noise.map((bytes) => ({ kind: 'gzip magic, then random bytes', bytes: Buffer.concat([GZIP_MAGIC, bytes]), real: false })),
  noise.map((bytes) => ({ kind: 'gzip of random bytes', bytes: gzipSync(bytes), real: false })),
  // Up to 4 MiB of zeros: an empty tar archive, or a small upload that expands past the limit (a "zip bomb").
  fc
    .integer({ min: 0, max: 4 * 1024 * 1024 })
    .map((length) => ({ kind: `gzip of ${length} zero bytes`, bytes: gzipSync(Buffer.alloc(length)), real: false })),
  realArchive.map((bytes) => ({ kind: 'a real archive', bytes, real: true })),
  fc.tuple(realArchive, fc.nat(), fc.integer({ min: 1, max: 255 })).map(([bytes, at, xor]) => {
    const changed = Buffer.from(bytes);
    changed[at % changed.length] ^= xor;
    return { kind: `a real archive, byte ${at % changed.length} changed`, bytes: changed, real: false };
  }),
  fc
    .tuple(realArchive, fc.nat())
    .map(([bytes, at]) => ({ kind: 'a real archive cut short', bytes: bytes.subarray(0, at % bytes.length), real: false })),
);
const uploadContentTypes = fc.option(
  fc.oneof(
    fc.constantFrom(
      'application/octet-stream',
      'application/gzip',
      'application/x-gzip',
      'application/x-tar',
      'application/json',
      'application/vnd.api+json',
      'application/vnd.api+json; ext=bulk',
      'text/plain; charset=utf-8',
      'multipart/form-data; boundary=x',
      'application/x-www-form-urlencoded',
      '',
    ),
    fc.string({ maxLength: 40 }).filter((value) => /^[\x20-\x7e]*$/.test(value)),
  ),
  { nil: null },
);

// ---------------------------------------------------------------------------------------------

/** Runs per property (per route where the property is per route): the whole file takes ~20 s. */
const RUNS = {
  hostile: 50,
  mutations: 50,
  pointer: 80,
  codePoints: 80,
  unknownAttributes: 20,
  failedWrites: 50,
  uploads: 60,
  planReports: 60,
};

const keyOf = (route: RouteDef): string => `${route.method} ${route.path}`;
const WRITE_ROUTES = ROUTES.filter((route) => ['POST', 'PATCH', 'PUT'].includes(route.method));
/** Write routes whose body is bytes (`body: 'raw'`): each has a property of its own (6.), not a WriteSpec. */
const RAW_ROUTES: Record<string, string> = {
  'PUT /uploads/configuration-versions/:upload_token': 'property 6: a configuration archive PUT to its upload URL',
  'PUT /plans/:plan_id/json-output': "property 7: a local run's plan JSON, reported by its pipeline",
  'PUT /runs/:run_id/plan/json-output': "property 7: a local run's plan JSON, reported by its pipeline",
};
/** Properties 1 to 5 cover every write route with a JSON body. */
const JSON_WRITE_ROUTES = WRITE_ROUTES.filter((route) => route.body !== 'raw');

describe('request bodies of every write route (property-based)', () => {
  let h: Harness;
  let taskServer: Server;
  const SPECS: Record<string, WriteSpec> = {};
  /** The workspace of the configuration versions (property 6 uploads to versions made there). */
  let wsVersions = '';
  /** A local workspace, whose runs wait for their pipeline's reports (property 7 reports plans there). */
  let wsPlanReports = '';

  const send = (route: RouteDef, path: string, body: unknown, token = h.adminToken): Promise<Response> => {
    const method = route.method.toLowerCase() as 'post' | 'patch' | 'put';
    // The identity serializer: superagent would otherwise JSON-encode the Buffer ({"type":"Buffer",…}).
    return h.http[method](`/api/v2${path}`)
      .set('Authorization', `Bearer ${token}`)
      .set('Content-Type', JSON_API)
      .serialize((bytes) => bytes)
      .send(encode(body));
  };

  const em = () => h.orm.em.fork();

  beforeAll(async () => {
    h = await startHarness({
      env: { CONFIGURATION_VERSION_MAX_BYTES: String(MAX_UPLOAD_BYTES), PLAN_JSON_MAX_BYTES: String(MAX_PLAN_REPORT_BYTES) },
    });
    // The verification endpoint of run tasks: 200 to anything but /fail….
    taskServer = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.statusCode = req.url?.startsWith('/fail') ? 500 : 200;
        res.end();
      });
    });
    await new Promise<void>((resolve) => taskServer.listen(0, '127.0.0.1', resolve));
    taskServerUrl = `http://127.0.0.1:${(taskServer.address() as AddressInfo).port}`;

    const admin = h.adminToken;
    const post = async (path: string, body: unknown): Promise<string> => {
      const res = await api(h, 'post', path, admin, body);
      if (res.status !== 201) throw new Error(`POST ${path}: ${describeResponse(res)}`);
      return res.body.data.id as string;
    };
    const main = await createOrganization(h, 'prop-main');
    const patched = await createOrganization(h, 'prop-patched');
    const mainId = (await em().findOneOrFail(Organization, { name: main })).id;
    const patchedId = (await em().findOneOrFail(Organization, { name: patched })).id;

    const workspace = (name: string) => createWorkspace(h, main, admin, name);
    const wsMain = await workspace('ws-main');
    const wsByName = await workspace('ws-by-name');
    const wsById = await workspace('ws-by-id');
    const wsTasks = await workspace('ws-tasks');
    const wsOverride = await workspace('ws-override');
    const wsOther = await createWorkspace(h, patched, admin, 'ws-other');

    const teamPatched = await createTeam(h, main, admin, 'team-patched');
    const teamToken = await createTeam(h, main, admin, 'team-token');
    const teamAccess = await createTeam(h, main, admin, 'team-access');
    const accessPatched = await grantWorkspace(h, admin, teamAccess, wsMain, { access: 'read' });

    const taskDocument = (name: string, url = taskServerUrl) => ({ data: { type: 'tasks', attributes: { name, url, category: 'task' } } });
    const taskPatched = await post(`/organizations/${main}/tasks`, taskDocument('task-patched'));
    const taskAttached = await post(`/organizations/${main}/tasks`, taskDocument('task-attached'));
    const taskOverride = await post(`/organizations/${main}/tasks`, taskDocument('task-override'));
    const attach = (workspaceId: string, taskId: string) =>
      post(`/workspaces/${workspaceId}/tasks`, {
        data: {
          type: 'workspace-tasks',
          attributes: { 'enforcement-level': 'mandatory', stages: ['post_plan'] },
          relationships: { task: { data: { type: 'tasks', id: taskId } } },
        },
      });
    const workspaceTaskPatched = await attach(wsTasks, taskAttached);
    await attach(wsOverride, taskOverride);

    const runWithStatus = async (workspaceId: string, status?: RunStatus): Promise<string> => {
      const runId = await createRun(h, admin, workspaceId);
      if (status) await em().nativeUpdate(Run, { id: runId }, { status });
      return runId;
    };
    const runForActions = await runWithStatus(wsMain);
    const canceledRun = await runWithStatus(wsMain, 'canceled');
    const stageOf = async (status: 'awaiting_override' | 'pending'): Promise<string> => {
      const runId = await runWithStatus(wsOverride);
      const stage = await em().findOneOrFail(TaskStage, { run: runId });
      await em().nativeUpdate(TaskStage, { id: stage.id }, { status });
      return stage.id;
    };
    const stageAwaiting = await stageOf('awaiting_override');
    const stagePending = await stageOf('pending');

    const directTask = async (organizationId: string): Promise<string> => {
      const fork = em();
      const task = fork.create(RunTask, {
        id: newId('task'),
        organization: organizationId,
        name: uniqueName('direct-task'),
        url: taskServerUrl,
        enabled: true,
        globalEnabled: false,
        globalStages: [],
        globalEnforcementLevel: 'advisory',
      });
      await fork.flush();
      return task.id;
    };
    const otherOrganizationTask = await directTask(patchedId);
    const workspaceName = async (id: string): Promise<string> => (await em().findOneOrFail(Workspace, { id })).name;

    // -- the specs ------------------------------------------------------------------------------

    const organizationAttributes = {
      email: str('email', 255),
      edition: oneOf(EDITIONS),
      'task-overrides-enabled': bool,
      // HCP's settings (the whole numbers are tested in the organization settings golden test).
      'default-execution-mode': oneOf(['remote', 'local']),
      'collaborator-auth-policy': oneOf(['password', 'two_factor_mandatory']),
      'allow-force-delete-workspaces': bool,
      'cost-estimation-enabled': bool,
      'speculative-plan-management-enabled': bool,
      'owners-team-saml-role-id': str('text', 255, { nullable: true }),
    };
    SPECS['POST /organizations'] = {
      attributes: '/data/attributes',
      fields: resourceFields('organizations', { name: str('name', 40), ...organizationAttributes }),
      required: ['/data', '/data/type', '/data/attributes', '/data/attributes/name', '/data/attributes/email'],
      success: 201,
      base: async () => ({
        path: '/organizations',
        body: {
          data: {
            type: 'organizations',
            attributes: { name: 'prop-base-org', email: 'base@example.test', edition: 'standard', 'task-overrides-enabled': 'true' },
          },
        },
      }),
      fresh: async () => ({
        path: '/organizations',
        body: { data: { type: 'organizations', attributes: { name: uniqueName('prop-org'), email: 'fresh@example.test' } } },
      }),
      failures: [
        async () => ({
          path: '/organizations',
          body: { data: { type: 'organizations', attributes: { name: main, email: 'dup@example.test' } } },
        }),
      ],
    };

    const patchOrganization = (attributes: Record<string, unknown>) => ({
      path: `/organizations/${patched}`,
      body: { data: { type: 'organizations', attributes } },
    });
    SPECS['PATCH /organizations/:organization_name'] = {
      attributes: '/data/attributes',
      fields: resourceFields('organizations', { ...organizationAttributes, name: str('name', 40) }),
      required: ['/data', '/data/type'],
      success: 200,
      base: async () =>
        patchOrganization({ email: 'patched@example.test', edition: 'standard', 'task-overrides-enabled': false, name: patched }),
      fresh: async () => patchOrganization({ email: 'patched@example.test', 'task-overrides-enabled': true }),
      failures: [
        // A rename to a taken name is refused with everything else of the request: the email stays.
        async () => patchOrganization({ email: 'renamed@example.test', name: main }),
        async () => ({ path: '/organizations/no-such-organization', body: patchOrganization({}).body }),
      ],
    };

    const tokenSpec = (path: string, missingPath: string): WriteSpec => {
      const document = (attributes: Record<string, unknown>) => ({ path, body: { data: { type: 'authentication-tokens', attributes } } });
      return {
        attributes: '/data/attributes',
        fields: {
          ...resourceFields('authentication-tokens', {
            description: str('text', 255, { nullable: true }),
            'expired-at': datetime(true),
          }),
          // go-tfe's "" and HCP's documented singular are accepted as well.
          '/data/type': oneOf(['', 'authentication-token', 'authentication-tokens']),
        },
        // Without data the body is `{}`, which is valid; so are missing attributes.
        required: ['/data/type'],
        success: 201,
        base: async () => document({ description: 'base', 'expired-at': FUTURE }),
        fresh: async () => document({ description: 'fresh', 'expired-at': FUTURE }),
        failures: [async () => ({ path: missingPath, body: document({ description: 'missing' }).body })],
      };
    };
    SPECS['POST /organizations/:organization_name/authentication-token'] = tokenSpec(
      `/organizations/${main}/authentication-token`,
      '/organizations/no-such-organization/authentication-token',
    );
    SPECS['POST /teams/:team_id/authentication-token'] = tokenSpec(
      `/teams/${teamToken}/authentication-token`,
      '/teams/team-doesnotexist000/authentication-token',
    );

    const teamAttributes = {
      name: str('text', 255, { nonEmpty: true }),
      'organization-access': object(),
      'organization-access/manage-run-tasks': bool,
      'organization-access/manage-workspaces': bool,
      'organization-access/manage-policy-overrides': bool,
    };
    const teamDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'teams', attributes } });
    const allAccess = { 'manage-run-tasks': false, 'manage-workspaces': 'false', 'manage-policy-overrides': false };
    SPECS['POST /organizations/:organization_name/teams'] = {
      attributes: '/data/attributes',
      fields: resourceFields('teams', teamAttributes),
      required: ['/data', '/data/type', '/data/attributes', '/data/attributes/name'],
      success: 201,
      base: async () => ({
        path: `/organizations/${main}/teams`,
        body: teamDocument({ name: 'team-base', 'organization-access': allAccess }),
      }),
      fresh: async () => ({
        path: `/organizations/${main}/teams`,
        body: teamDocument({ name: uniqueName('team 🚀 fresh'), 'organization-access': { 'manage-workspaces': true } }),
      }),
      failures: [
        // Taken names are those of resources no PATCH here targets: a hostile body may rename the others.
        async () => ({ path: `/organizations/${main}/teams`, body: teamDocument({ name: 'team-token' }) }),
        async () => ({ path: '/organizations/no-such-organization/teams', body: teamDocument({ name: uniqueName('team') }) }),
      ],
    };
    SPECS['PATCH /teams/:team_id'] = {
      attributes: '/data/attributes',
      fields: resourceFields('teams', teamAttributes),
      required: ['/data', '/data/type'],
      success: 200,
      base: async () => ({ path: `/teams/${teamPatched}`, body: teamDocument({ name: 'team-patched', 'organization-access': allAccess }) }),
      fresh: async () => ({ path: `/teams/${teamPatched}`, body: teamDocument({ 'organization-access': { 'manage-run-tasks': 'true' } }) }),
      failures: [
        // Taken name: the unique violation rolls the whole change back, access included.
        async () => ({
          path: `/teams/${teamPatched}`,
          body: teamDocument({ name: 'team-token', 'organization-access': { 'manage-policy-overrides': true } }),
        }),
        async () => ({ path: '/teams/team-doesnotexist000', body: teamDocument({}) }),
      ],
    };

    const accessAttributes = { access: oneOf(TEAM_WORKSPACE_ACCESS), runs: oneOf(TEAM_RUNS_ACCESS), 'run-tasks': bool };
    const accessDocument = (teamId: string, workspaceId: string, attributes: Record<string, unknown> = {}) => ({
      data: {
        type: 'team-workspaces',
        attributes,
        relationships: {
          team: { data: { type: 'teams', id: teamId } },
          workspace: { data: { type: 'workspaces', id: workspaceId } },
        },
      },
    });
    SPECS['POST /team-workspaces'] = {
      attributes: '/data/attributes',
      fields: resourceFields('team-workspaces', accessAttributes, {
        '': object(),
        ...relationshipFields('team', 'teams'),
        ...relationshipFields('workspace', 'workspaces'),
      }),
      required: ['/data', '/data/type', ...relationshipRequired('team'), ...relationshipRequired('workspace').slice(1)],
      success: 201,
      base: async () => ({
        path: '/team-workspaces',
        body: accessDocument(teamAccess, wsMain, { access: 'custom', runs: 'plan', 'run-tasks': 'false' }),
      }),
      fresh: async () => ({
        path: '/team-workspaces',
        body: accessDocument(await createTeam(h, main, admin, uniqueName('team-fresh')), wsMain, { access: 'write' }),
      }),
      failures: [
        async () => ({ path: '/team-workspaces', body: accessDocument(teamAccess, wsMain, { access: 'admin' }) }),
        async () => ({ path: '/team-workspaces', body: accessDocument('team-doesnotexist000', wsMain) }),
        async () => ({ path: '/team-workspaces', body: accessDocument(teamPatched, wsOther) }),
      ],
    };
    const accessPatch = (attributes: Record<string, unknown>) => ({ data: { type: 'team-workspaces', attributes } });
    SPECS['PATCH /team-workspaces/:id'] = {
      attributes: '/data/attributes',
      fields: resourceFields('team-workspaces', accessAttributes),
      required: ['/data', '/data/type'],
      success: 200,
      base: async () => ({
        path: `/team-workspaces/${accessPatched}`,
        body: accessPatch({ access: 'custom', runs: 'apply', 'run-tasks': true }),
      }),
      fresh: async () => ({ path: `/team-workspaces/${accessPatched}`, body: accessPatch({ access: 'read' }) }),
      failures: [async () => ({ path: '/team-workspaces/tws-doesnotexist0000', body: accessPatch({ access: 'admin' }) })],
    };

    const workspaceAttributes = {
      description: str('text', 1000, { nullable: true }),
      'auto-apply': bool,
      'working-directory': str('text', 1000),
      // terraform_version is varchar(32).
      'terraform-version': str('version', 32),
      'tag-names': list(),
      'tag-names/0': str('name', 255),
    };
    const workspaceDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'workspaces', attributes } });
    const allWorkspaceAttributes = (name: string) => ({
      name,
      description: 'a workspace ✓',
      'auto-apply': 'false',
      'working-directory': 'infra/中文',
      'terraform-version': '1.9.5',
      'tag-names': ['prop-tag', 'env:prop'],
    });
    SPECS['POST /organizations/:organization_name/workspaces'] = {
      attributes: '/data/attributes',
      fields: resourceFields('workspaces', { name: str('name', 90), ...workspaceAttributes }),
      required: ['/data', '/data/type', '/data/attributes', '/data/attributes/name'],
      success: 201,
      base: async () => ({ path: `/organizations/${main}/workspaces`, body: workspaceDocument(allWorkspaceAttributes('ws-base')) }),
      fresh: async () => ({ path: `/organizations/${main}/workspaces`, body: workspaceDocument(allWorkspaceAttributes(uniqueName('ws'))) }),
      failures: [async () => ({ path: `/organizations/${main}/workspaces`, body: workspaceDocument({ name: 'ws-main' }) })],
    };
    const workspacePatchSpec = (workspaceId: string, pathFor: (name: string) => string): WriteSpec => {
      // The name is read back each time: a hostile body may have renamed the workspace.
      const current = async (): Promise<[string, string]> => {
        const name = await workspaceName(workspaceId);
        return [pathFor(name), name];
      };
      return {
        attributes: '/data/attributes',
        fields: resourceFields('workspaces', { name: str('name', 90), ...workspaceAttributes }),
        required: ['/data', '/data/type'],
        success: 200,
        base: async () => {
          const [path, name] = await current();
          return { path, body: workspaceDocument(allWorkspaceAttributes(name)) };
        },
        fresh: async () => ({ path: (await current())[0], body: workspaceDocument({ description: null, 'auto-apply': true }) }),
        failures: [
          // Taken name: nothing of the change is kept.
          async () => ({ path: (await current())[0], body: workspaceDocument({ name: 'ws-main', description: 'renamed' }) }),
        ],
      };
    };
    SPECS['PATCH /organizations/:organization_name/workspaces/:workspace_name'] = workspacePatchSpec(
      wsByName,
      (name) => `/organizations/${main}/workspaces/${encodeURIComponent(name)}`,
    );
    SPECS['PATCH /workspaces/:workspace_id'] = workspacePatchSpec(wsById, () => `/workspaces/${wsById}`);

    const runDocument = (workspaceId: string, attributes: Record<string, unknown>, configurationVersion?: unknown) => ({
      data: {
        type: 'runs',
        attributes,
        relationships: {
          workspace: { data: { type: 'workspaces', id: workspaceId } },
          ...(configurationVersion === undefined ? {} : { 'configuration-version': configurationVersion }),
        },
      },
    });
    SPECS['POST /runs'] = {
      attributes: '/data/attributes',
      fields: resourceFields(
        'runs',
        {
          message: str('text', 10_000, { nullable: true }),
          'plan-only': bool,
          'is-destroy': bool,
          'auto-apply': bool,
          'plan-json': { type: 'object', nullable: false, planJson: true },
        },
        {
          '': object(),
          ...relationshipFields('workspace', 'workspaces'),
          // configuration_version_id is varchar(32).
          ...relationshipFields('configuration-version', 'configuration-versions', { max: 32, nullable: true, nonEmpty: false }),
        },
      ),
      required: [
        '/data',
        '/data/type',
        ...relationshipRequired('workspace'),
        '/data/relationships/configuration-version/data',
        '/data/relationships/configuration-version/data/type',
        '/data/relationships/configuration-version/data/id',
      ],
      success: 201,
      base: async () => ({
        path: '/runs',
        body: runDocument(
          wsMain,
          { message: 'base', 'plan-only': 'false', 'is-destroy': false, 'auto-apply': false, 'plan-json': { format_version: '1.2' } },
          { data: { type: 'configuration-versions', id: 'cv-ntv3HbhJqvFzamy7' } },
        ),
      }),
      // The deepest plan document accepted.
      fresh: async () => ({ path: '/runs', body: runDocument(wsMain, { message: 'fresh', 'plan-json': deepObject(MAX_PLAN_DEPTH) }) }),
      failures: [async () => ({ path: '/runs', body: runDocument('ws-doesnotexist00000', { message: 'missing' }) })],
    };

    const actionSpec = (action: 'apply' | 'cancel' | 'discard'): WriteSpec => ({
      attributes: '',
      fields: { '/comment': str('text', 10_000, { nullable: true }) },
      required: [],
      success: 202,
      base: async () => ({ path: `/runs/${runForActions}/actions/${action}`, body: { comment: 'base' } }),
      fresh: async () => ({
        path: `/runs/${await runWithStatus(wsMain, action === 'apply' ? 'planned' : undefined)}/actions/${action}`,
        body: { comment: 'fresh 🚀' },
      }),
      failures: [
        async () => ({ path: `/runs/${canceledRun}/actions/${action}`, body: { comment: 'too late' } }),
        async () => ({ path: `/runs/run-doesnotexist0000/actions/${action}`, body: {} }),
      ],
    });
    SPECS['POST /runs/:run_id/actions/apply'] = actionSpec('apply');
    const commentDocument = (body: string) => ({ data: { type: 'comments', attributes: { body } } });
    SPECS['POST /runs/:run_id/comments'] = {
      attributes: '/data/attributes',
      fields: resourceFields('comments', { body: str('text', 10_000, { nonEmpty: true }) }),
      required: ['/data', '/data/type', '/data/attributes', '/data/attributes/body'],
      success: 201,
      base: async () => ({ path: `/runs/${runForActions}/comments`, body: commentDocument('base') }),
      fresh: async () => ({ path: `/runs/${runForActions}/comments`, body: commentDocument('fresh 🚀') }),
      failures: [async () => ({ path: '/runs/run-doesnotexist0000/comments', body: commentDocument('nowhere') })],
    };
    // Tags: a workspace's (by name or id), and a tag's workspaces (by id); both answer 204 and are idempotent.
    const tagged = await api(h, 'post', `/workspaces/${wsMain}/relationships/tags`, admin, {
      data: [{ type: 'tags', attributes: { name: 'prop-tag' } }],
    });
    if (tagged.status !== 204) throw new Error(`tag ws-main: ${describeResponse(tagged)}`);
    const tagId = (await api(h, 'get', `/workspaces/${wsMain}/relationships/tags`, admin)).body.data[0].id as string;
    const tagList = (...entries: Record<string, unknown>[]) => ({ data: entries.map((entry) => ({ type: 'tags', ...entry })) });
    SPECS['POST /workspaces/:workspace_id/relationships/tags'] = {
      attributes: '/data/0/attributes',
      fields: {
        '/data': list(),
        '/data/0': object(),
        '/data/0/type': literal('tags'),
        '/data/0/attributes': object(),
        // Tag names allow colons too; every wrong name of the model is wrong for a tag as well.
        '/data/0/attributes/name': str('name', 255),
        '/data/1': object(),
        '/data/1/type': literal('tags'),
        '/data/1/id': str('id', 64),
      },
      // Members of list items cannot be dropped by this file's mutations (only set).
      required: ['/data'],
      success: 204,
      base: async () => ({
        path: `/workspaces/${wsMain}/relationships/tags`,
        body: tagList({ attributes: { name: 'prop-tag' } }, { id: tagId }),
      }),
      fresh: async () => ({ path: `/workspaces/${wsMain}/relationships/tags`, body: tagList({ attributes: { name: 'team:prop_2-b' } }) }),
      failures: [
        async () => ({
          path: `/workspaces/${wsMain}/relationships/tags`,
          body: tagList({ attributes: { name: 'unsaved' } }, { id: 'tag-doesnotexist0000' }),
        }),
        async () => ({ path: '/workspaces/ws-doesnotexist00000/relationships/tags', body: tagList({ attributes: { name: 'nowhere' } }) }),
      ],
    };
    const workspaceList = (...ids: string[]) => ({ data: ids.map((id) => ({ type: 'workspaces', id })) });
    SPECS['POST /tags/:tag_id/relationships/workspaces'] = {
      attributes: '/data/0',
      fields: { '/data': list(), '/data/0': object(), '/data/0/type': literal('workspaces'), '/data/0/id': str('id', 64) },
      required: ['/data'],
      success: 204,
      base: async () => ({ path: `/tags/${tagId}/relationships/workspaces`, body: workspaceList(wsMain) }),
      fresh: async () => ({ path: `/tags/${tagId}/relationships/workspaces`, body: workspaceList(wsTasks, wsMain) }),
      failures: [
        async () => ({ path: `/tags/${tagId}/relationships/workspaces`, body: workspaceList(wsTasks, 'ws-doesnotexist00000') }),
        async () => ({ path: `/tags/${tagId}/relationships/workspaces`, body: workspaceList(wsOther) }),
        async () => ({ path: '/tags/tag-doesnotexist0000/relationships/workspaces', body: workspaceList(wsMain) }),
      ],
    };
    SPECS['POST /runs/:run_id/actions/cancel'] = actionSpec('cancel');
    SPECS['POST /runs/:run_id/actions/discard'] = actionSpec('discard');

    // The workspace queue's actions: locks, and forcing a waiting run (force-cancel always 409s here: a cancel ends a run at once).
    const lockedWorkspace = async (): Promise<string> => {
      const id = await workspace(uniqueName('ws-lock'));
      const res = await api(h, 'post', `/workspaces/${id}/actions/lock`, admin, { reason: 'set-up' });
      if (res.status !== 200) throw new Error(`lock: ${res.status} ${res.text}`);
      return id;
    };
    // Each base and failure has a workspace of its own: a mutated base may succeed, and must not unlock a failure's.
    const wsLockBase = await workspace('ws-lock-base');
    const lockedBase = await lockedWorkspace();
    const neverLocked = await workspace('ws-never-locked');
    SPECS['POST /workspaces/:workspace_id/actions/lock'] = {
      attributes: '',
      fields: { '/reason': str('text', 1000) },
      required: [],
      success: 200,
      base: async () => ({ path: `/workspaces/${wsLockBase}/actions/lock`, body: { reason: 'base' } }),
      fresh: async () => ({ path: `/workspaces/${await workspace(uniqueName('ws-lock'))}/actions/lock`, body: { reason: 'fresh 🚀' } }),
      failures: [
        async () => ({ path: `/workspaces/${await lockedWorkspace()}/actions/lock`, body: { reason: 'again' } }),
        async () => ({ path: '/workspaces/ws-doesnotexist0000/actions/lock', body: {} }),
      ],
    };
    const unlockSpec = (action: 'unlock' | 'force-unlock'): WriteSpec => ({
      attributes: '',
      fields: {},
      required: [],
      success: 200,
      base: async () => ({ path: `/workspaces/${action === 'unlock' ? lockedBase : await lockedWorkspace()}/actions/${action}`, body: {} }),
      fresh: async () => ({ path: `/workspaces/${await lockedWorkspace()}/actions/${action}`, body: {} }),
      failures: [
        async () => ({ path: `/workspaces/${neverLocked}/actions/${action}`, body: {} }),
        async () => ({ path: `/workspaces/ws-doesnotexist0000/actions/${action}`, body: {} }),
      ],
    });
    SPECS['POST /workspaces/:workspace_id/actions/unlock'] = unlockSpec('unlock');
    SPECS['POST /workspaces/:workspace_id/actions/force-unlock'] = unlockSpec('force-unlock');
    /** A run waiting behind another on a workspace of its own. */
    const waitingRun = async (): Promise<string> => {
      const id = await workspace(uniqueName('ws-queue'));
      await createRun(h, admin, id);
      return createRun(h, admin, id);
    };
    const baseWaiting = await waitingRun();
    SPECS['POST /runs/:run_id/actions/force-execute'] = {
      attributes: '',
      fields: { '/comment': str('text', 10_000, { nullable: true }) },
      required: [],
      success: 202,
      base: async () => ({ path: `/runs/${baseWaiting}/actions/force-execute`, body: {} }),
      fresh: async () => ({ path: `/runs/${await waitingRun()}/actions/force-execute`, body: {} }),
      failures: [
        async () => ({ path: `/runs/${canceledRun}/actions/force-execute`, body: {} }),
        async () => ({ path: '/runs/run-doesnotexist0000/actions/force-execute', body: {} }),
      ],
    };
    SPECS['POST /runs/:run_id/actions/force-cancel'] = {
      attributes: '',
      fields: { '/comment': str('text', 10_000, { nullable: true }) },
      required: [],
      success: 409,
      base: async () => ({ path: `/runs/${canceledRun}/actions/force-cancel`, body: { comment: 'base' } }),
      fresh: async () => ({ path: `/runs/${await runWithStatus(wsMain, 'canceled')}/actions/force-cancel`, body: { comment: 'fresh' } }),
      failures: [async () => ({ path: '/runs/run-doesnotexist0000/actions/force-cancel', body: {} })],
    };

    // The reports of a local run: its plan errored, its apply finished or errored (by its own id or its run's).
    const wsLocal = await workspace('ws-local');
    await em().nativeUpdate(Workspace, { id: wsLocal }, { executionMode: 'local' });
    wsPlanReports = wsLocal;
    const reportSpec = (kind: 'plan/actions/error' | 'apply/actions/finish' | 'apply/actions/error', byRun: boolean): WriteSpec => {
      const status: RunStatus = kind.startsWith('plan') ? 'planning' : 'applying';
      const pathOf = async (runId: string): Promise<string> => {
        if (byRun) return `/runs/${runId}/${kind}`;
        const run = await em().findOneOrFail(Run, { id: runId });
        return kind.startsWith('plan') ? `/plans/${run.planId}/actions/error` : `/applies/${run.applyId}/${kind.replace('apply/', '')}`;
      };
      const withMessage = kind.endsWith('error');
      const body = (message: string) => (withMessage ? { message } : { comment: message });
      const waiting = runWithStatus(wsLocal, status);
      return {
        attributes: '',
        fields: withMessage
          ? { '/message': str('text', 10_000, { nonEmpty: true }) }
          : { '/comment': str('text', 10_000, { nullable: true }) },
        required: withMessage ? ['/message'] : [],
        success: 200,
        base: async () => ({ path: await pathOf(await waiting), body: body('base') }),
        fresh: async () => ({ path: await pathOf(await runWithStatus(wsLocal, status)), body: body('fresh 🚀') }),
        failures: [
          // Not waiting for this report, a remote run, and no run at all.
          async () => ({ path: await pathOf(await runWithStatus(wsLocal, 'pending')), body: body('too early') }),
          async () => ({ path: await pathOf(await runWithStatus(wsMain, status)), body: body('remote') }),
          async () => ({
            path: byRun
              ? `/runs/run-doesnotexist0000/${kind}`
              : kind.startsWith('plan')
                ? '/plans/plan-doesnotexist000/actions/error'
                : `/applies/apply-doesnotexist00/${kind.replace('apply/', '')}`,
            body: body('none'),
          }),
        ],
      };
    };
    SPECS['POST /plans/:plan_id/actions/error'] = reportSpec('plan/actions/error', false);
    SPECS['POST /runs/:run_id/plan/actions/error'] = reportSpec('plan/actions/error', true);
    SPECS['POST /applies/:apply_id/actions/finish'] = reportSpec('apply/actions/finish', false);
    SPECS['POST /runs/:run_id/apply/actions/finish'] = reportSpec('apply/actions/finish', true);
    SPECS['POST /applies/:apply_id/actions/error'] = reportSpec('apply/actions/error', false);
    SPECS['POST /runs/:run_id/apply/actions/error'] = reportSpec('apply/actions/error', true);

    SPECS['POST /task-stages/:task_stage_id/actions/override'] = {
      attributes: '',
      fields: { '/comment': str('text', 10_000, { nullable: true }) },
      required: [],
      success: 200,
      base: async () => ({ path: `/task-stages/${stageAwaiting}/actions/override`, body: { comment: 'base' } }),
      fresh: async () => ({ path: `/task-stages/${await stageOf('awaiting_override')}/actions/override`, body: { comment: null } }),
      failures: [
        async () => ({ path: `/task-stages/${stagePending}/actions/override`, body: { comment: 'not awaiting' } }),
        async () => ({ path: '/task-stages/ts-doesnotexist00000/actions/override', body: {} }),
      ],
    };

    const runTaskAttributes = (nameKind: Kind): Record<string, Kind> => ({
      name: nameKind,
      url: str('url', 2048),
      description: str('text', 300, { nullable: true }),
      category: literal('task'),
      'hmac-key': str('text', 512, { nullable: true }),
      hmac_key: str('text', 512, { nullable: true }),
      enabled: bool,
      'global-configuration': object(true),
      'global-configuration/enabled': bool,
      'global-configuration/stages': stages(false),
      'global-configuration/enforcement-level': oneOf(ENFORCEMENT_LEVELS),
    });
    const runTaskDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'tasks', attributes } });
    const allRunTaskAttributes = (name: string) => ({
      name,
      url: taskServerUrl,
      description: 'checks ✓',
      category: 'task',
      enabled: 'true',
      'global-configuration': { enabled: false, stages: ['pre_plan', 'post_plan'], 'enforcement-level': 'advisory' },
    });
    SPECS['POST /organizations/:organization_name/tasks'] = {
      attributes: '/data/attributes',
      fields: resourceFields('tasks', runTaskAttributes(str('name', 255))),
      required: ['/data', '/data/type', '/data/attributes', '/data/attributes/name', '/data/attributes/url', '/data/attributes/category'],
      success: 201,
      base: async () => ({ path: `/organizations/${main}/tasks`, body: runTaskDocument(allRunTaskAttributes('task-base')) }),
      fresh: async () => ({
        path: `/organizations/${main}/tasks`,
        body: runTaskDocument({ ...allRunTaskAttributes(uniqueName('task')), 'hmac-key': 'secret' }),
      }),
      failures: [
        // The endpoint does not acknowledge the verification request.
        async () => ({
          path: `/organizations/${main}/tasks`,
          body: runTaskDocument({ ...allRunTaskAttributes(uniqueName('task')), url: `${taskServerUrl}/fail` }),
        }),
        async () => ({ path: `/organizations/${main}/tasks`, body: runTaskDocument(allRunTaskAttributes('task-attached')) }),
      ],
    };
    SPECS['PATCH /tasks/:task_id'] = {
      attributes: '/data/attributes',
      fields: resourceFields('tasks', runTaskAttributes(str('name', 255, { nonEmpty: true }))),
      required: ['/data', '/data/type'],
      success: 200,
      base: async () => ({ path: `/tasks/${taskPatched}`, body: runTaskDocument(allRunTaskAttributes('task-patched')) }),
      fresh: async () => ({ path: `/tasks/${taskPatched}`, body: runTaskDocument({ description: 'fresh', enabled: false }) }),
      failures: [
        // A URL that fails verification: nothing is changed, not even the description.
        async () => ({ path: `/tasks/${taskPatched}`, body: runTaskDocument({ description: 'changed', url: `${taskServerUrl}/fail` }) }),
        async () => ({ path: `/tasks/${taskPatched}`, body: runTaskDocument({ name: 'task-attached', description: 'changed' }) }),
        async () => ({ path: '/tasks/task-doesnotexist000', body: runTaskDocument({ description: 'missing' }) }),
      ],
    };

    const stageAttributes = { stage: oneOf(RUN_STAGES), stages: stages(true) };
    const workspaceTaskDocument = (taskId: string, attributes: Record<string, unknown>) => ({
      data: { type: 'workspace-tasks', attributes, relationships: { task: { data: { type: 'tasks', id: taskId } } } },
    });
    SPECS['POST /workspaces/:workspace_id/tasks'] = {
      attributes: '/data/attributes',
      fields: resourceFields(
        'workspace-tasks',
        { 'enforcement-level': oneOf(ENFORCEMENT_LEVELS), ...stageAttributes },
        { '': object(), ...relationshipFields('task', 'tasks') },
      ),
      required: ['/data', '/data/type', '/data/attributes', '/data/attributes/enforcement-level', ...relationshipRequired('task')],
      success: 201,
      base: async () => ({
        path: `/workspaces/${wsTasks}/tasks`,
        body: workspaceTaskDocument(taskAttached, {
          'enforcement-level': 'advisory',
          stage: 'pre_plan',
          stages: ['pre_apply', 'post_plan'],
        }),
      }),
      fresh: async () => ({
        path: `/workspaces/${wsTasks}/tasks`,
        body: workspaceTaskDocument(await directTask(mainId), { 'enforcement-level': 'mandatory', stages: ['pre_plan'] }),
      }),
      failures: [
        async () => ({
          path: `/workspaces/${wsTasks}/tasks`,
          body: workspaceTaskDocument(taskAttached, { 'enforcement-level': 'advisory' }),
        }),
        async () => ({
          path: `/workspaces/${wsTasks}/tasks`,
          body: workspaceTaskDocument('task-doesnotexist000', { 'enforcement-level': 'advisory' }),
        }),
        async () => ({
          path: `/workspaces/${wsTasks}/tasks`,
          body: workspaceTaskDocument(otherOrganizationTask, { 'enforcement-level': 'advisory' }),
        }),
      ],
    };
    const workspaceTaskPatch = (attributes: Record<string, unknown>) => ({ data: { type: 'workspace-tasks', attributes } });
    SPECS['PATCH /workspaces/:workspace_id/tasks/:workspace_task_id'] = {
      attributes: '/data/attributes',
      fields: {
        '/data': object(),
        '/data/type': literal('workspace-tasks'),
        '/data/attributes': object(),
        ...attributeFields('/data/attributes', { 'enforcement-level': oneOf(ENFORCEMENT_LEVELS), ...stageAttributes }),
      },
      required: ['/data'],
      success: 200,
      base: async () => ({
        path: `/workspaces/${wsTasks}/tasks/${workspaceTaskPatched}`,
        body: workspaceTaskPatch({ 'enforcement-level': 'mandatory', stage: 'post_plan', stages: ['post_plan'] }),
      }),
      fresh: async () => ({
        path: `/workspaces/${wsTasks}/tasks/${workspaceTaskPatched}`,
        body: workspaceTaskPatch({ 'enforcement-level': 'advisory', stage: 'pre_apply' }),
      }),
      failures: [
        async () => ({
          path: `/workspaces/${wsTasks}/tasks/wstask-doesnotexist0`,
          body: workspaceTaskPatch({ 'enforcement-level': 'advisory' }),
        }),
      ],
    };

    // -- task server callbacks: authorized by the result's own access token ------------------------
    const openResult = async (): Promise<{ id: string; token: string }> => {
      const runId = await runWithStatus(wsOverride);
      const result = await em().findOneOrFail(TaskResult, { taskStage: { run: runId } });
      const token = generateToken(CALLBACK_TOKEN_PREFIX);
      await em().nativeUpdate(TaskResult, { id: result.id }, { callbackTokenHash: h.secrets.hashToken(token), status: 'running' });
      return { id: result.id, token };
    };
    const callbackResult = await openResult();
    const finalResult = await openResult();
    await em().nativeUpdate(TaskResult, { id: finalResult.id }, { status: 'passed' });
    const expiredResult = await openResult();
    const longAgo = new Date(Date.now() - 60_000);
    await em().nativeUpdate(TaskResult, { id: expiredResult.id }, { progressDeadline: longAgo, hardDeadline: longAgo });

    const outcomeFields = (prefix: string): Record<string, Kind> => ({
      [prefix]: object(),
      [`${prefix}/outcome-id`]: str('text', 255),
      [`${prefix}/description`]: str('text', 1000, { nullable: true }),
      // body may be 5 MiB: only its type is checked here.
      [`${prefix}/body`]: str('text', Number.POSITIVE_INFINITY, { nullable: true }),
      [`${prefix}/url`]: str('text', 2048, { nullable: true }),
      [`${prefix}/tags`]: object(),
      [`${prefix}/tags/Severity`]: list(),
      [`${prefix}/tags/Severity/0`]: object(),
      [`${prefix}/tags/Severity/0/label`]: str('text', 256),
      [`${prefix}/tags/Severity/0/level`]: oneOf(['none', 'info', 'warning', 'error']),
    });
    const outcome = (id: string) => ({
      'outcome-id': id,
      description: 'one finding ✓',
      body: '# Details\n\n中文 😀',
      url: 'https://tasks.example.test/outcomes/1',
      tags: { Severity: [{ label: 'High', level: 'error' }], Status: [{ label: 'Denied' }] },
    });
    const callbackDocument = (status: string) => ({
      data: {
        type: 'task-results',
        attributes: { status, message: 'base ✓', url: 'https://tasks.example.test/results/1', outcomes: [outcome('flat-1')] },
        relationships: {
          outcomes: { data: [{ type: 'task-result-outcomes', attributes: outcome('wrapped-1') }] },
          'task-result-outcomes': { data: [{ type: 'task-result-outcomes', attributes: outcome('wrapped-2') }] },
        },
      },
    });
    const OUTCOME_ITEM = /^(\/data\/attributes\/outcomes\/0|\/data\/relationships\/(?:outcomes|task-result-outcomes)\/data\/0)\/./;
    SPECS['PATCH /task-results/:task_result_id/callback'] = {
      attributes: '/data/attributes',
      fields: {
        '/data': object(),
        '/data/type': oneOf(['task-results', 'task_results']),
        '/data/attributes': object(),
        '/data/attributes/status': oneOf(['running', 'passed', 'failed']),
        '/data/attributes/message': str('text', 10_000, { nullable: true }),
        '/data/attributes/url': str('text', 2048, { nullable: true }),
        '/data/attributes/outcomes': list(),
        ...outcomeFields('/data/attributes/outcomes/0'),
        '/data/relationships': object(),
        '/data/relationships/outcomes': object(),
        '/data/relationships/outcomes/data': list(),
        '/data/relationships/outcomes/data/0': object(),
        ...outcomeFields('/data/relationships/outcomes/data/0/attributes'),
        '/data/relationships/task-result-outcomes': object(),
        '/data/relationships/task-result-outcomes/data': list(),
        ...outcomeFields('/data/relationships/task-result-outcomes/data/0/attributes'),
      },
      required: [
        '/data',
        '/data/type',
        '/data/attributes',
        '/data/attributes/status',
        '/data/relationships/outcomes/data',
        '/data/relationships/task-result-outcomes/data',
      ],
      success: 200,
      // An outcome has one of two shapes (wrapped in {type, attributes}, or flat): a wrong member is reported at the outcome.
      reportedAt: (pointer) => OUTCOME_ITEM.exec(pointer)?.[1] ?? pointer,
      base: async () => {
        // A hostile body may have been a valid verdict: reopen the result.
        await em().nativeUpdate(TaskResult, { id: callbackResult.id, status: { $ne: 'running' } }, { status: 'running' });
        return { path: `/task-results/${callbackResult.id}/callback`, body: callbackDocument('running'), token: callbackResult.token };
      },
      fresh: async () => {
        const result = await openResult();
        return { path: `/task-results/${result.id}/callback`, body: callbackDocument('passed'), token: result.token };
      },
      failures: [
        async () => ({ path: `/task-results/${finalResult.id}/callback`, body: callbackDocument('failed'), token: finalResult.token }),
        async () => ({ path: `/task-results/${expiredResult.id}/callback`, body: callbackDocument('passed'), token: expiredResult.token }),
        async () => ({ path: `/task-results/${callbackResult.id}/callback`, body: callbackDocument('passed'), token: finalResult.token }),
        async () => ({ path: `/task-results/${callbackResult.id}/callback`, body: callbackDocument('passed') }),
      ],
    };

    // -- configuration versions ----------------------------------------------------------------------
    wsVersions = await workspace('ws-versions');
    // A team that may read the workspace's runs, not plan them: it may not create versions.
    const teamRead = await createTeam(h, main, admin, 'team-read');
    await grantWorkspace(h, admin, teamRead, wsVersions, { access: 'read' });
    const teamReadToken = await createTeamToken(h, admin, teamRead);
    const versionDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'configuration-versions', attributes } });
    SPECS['POST /workspaces/:workspace_id/configuration-versions'] = {
      attributes: '/data/attributes',
      fields: resourceFields('configuration-versions', { 'auto-queue-runs': bool, speculative: bool }),
      // No body and `{}` are valid (go-tfe always sends a document; every attribute has a default).
      required: ['/data/type'],
      success: 201,
      base: async () => ({
        path: `/workspaces/${wsVersions}/configuration-versions`,
        body: versionDocument({ 'auto-queue-runs': 'false', speculative: false }),
      }),
      fresh: async () => ({ path: `/workspaces/${wsVersions}/configuration-versions`, body: versionDocument({ speculative: 'true' }) }),
      failures: [
        async () => ({ path: '/workspaces/ws-doesnotexist00000/configuration-versions', body: versionDocument({}) }),
        async () => ({ path: `/workspaces/${wsVersions}/configuration-versions`, body: versionDocument({}), token: teamReadToken }),
      ],
    };
    /** An uploaded version that is not the workspace's current one (a newer one is uploaded after it). */
    const archivableVersion = async (): Promise<string> => {
      const older = await uploadedVersion();
      await uploadedVersion();
      return older;
    };
    const uploadedVersion = async (): Promise<string> => {
      const res = await api(
        h,
        'post',
        `/workspaces/${wsVersions}/configuration-versions`,
        admin,
        versionDocument({ 'auto-queue-runs': false }),
      );
      const put = await h.http
        .put(new URL(String(res.body.data.attributes['upload-url'])).pathname)
        .set('Content-Type', 'application/octet-stream')
        .send(tarGz('resource "null_resource" "archived" {}\n'));
      if (put.status !== 200) throw new Error(`upload a configuration version: ${describeResponse(put)}`);
      return res.body.data.id as string;
    };
    const pendingVersion = (
      await api(h, 'post', `/workspaces/${wsVersions}/configuration-versions`, admin, versionDocument({ 'auto-queue-runs': false }))
    ).body.data.id as string;
    const baseVersion = await archivableVersion();
    SPECS['POST /configuration-versions/:configuration_version_id/actions/archive'] = {
      attributes: '',
      fields: { '/comment': str('text', 10_000, { nullable: true }) },
      required: [],
      success: 202,
      base: async () => ({ path: `/configuration-versions/${baseVersion}/actions/archive`, body: { comment: 'base' } }),
      fresh: async () => ({ path: `/configuration-versions/${await archivableVersion()}/actions/archive`, body: { comment: 'fresh' } }),
      failures: [
        async () => ({ path: `/configuration-versions/${pendingVersion}/actions/archive`, body: {} }),
        async () => ({ path: '/configuration-versions/cv-doesnotexist0000/actions/archive', body: {} }),
        async () => ({ path: `/configuration-versions/${await archivableVersion()}/actions/archive`, body: {}, token: teamReadToken }),
      ],
    };

    // Safe delete: the base workspace stays locked, so a valid body is refused (409) and it is never deleted.
    const safeDeleteLocked = await workspace('ws-safe-delete-locked');
    const safeDeleteLock = await api(h, 'post', `/workspaces/${safeDeleteLocked}/actions/lock`, admin, { reason: 'kept' });
    if (safeDeleteLock.status !== 200) throw new Error(`lock a workspace: ${describeResponse(safeDeleteLock)}`);
    const safeDeleteSpec = (pathOf: (id: string, name: string) => string): WriteSpec => ({
      attributes: '',
      fields: { '/comment': str('text', 10_000, { nullable: true }) },
      required: [],
      success: 204,
      base: async () => ({ path: pathOf(safeDeleteLocked, 'ws-safe-delete-locked'), body: { comment: 'base' } }),
      fresh: async () => {
        const name = uniqueName('ws-safe-delete');
        return { path: pathOf(await workspace(name), name), body: { comment: 'fresh' } };
      },
      failures: [
        async () => ({ path: pathOf(safeDeleteLocked, 'ws-safe-delete-locked'), body: {} }),
        async () => ({ path: pathOf('ws-doesnotexist00000', 'no-such-workspace'), body: {} }),
        async () => ({ path: pathOf(safeDeleteLocked, 'ws-safe-delete-locked'), body: {}, token: teamReadToken }),
      ],
    });
    SPECS['POST /workspaces/:workspace_id/actions/safe-delete'] = safeDeleteSpec((id) => `/workspaces/${id}/actions/safe-delete`);
    SPECS['POST /organizations/:organization_name/workspaces/:workspace_name/actions/safe-delete'] = safeDeleteSpec(
      (_, name) => `/organizations/${main}/workspaces/${name}/actions/safe-delete`,
    );

    // Remote state consumers: the base names the consumer the subject already has, so a mutated base that is accepted changes nothing.
    const consumersPath = (id: string) => `/workspaces/${id}/relationships/remote-state-consumers`;
    const consumersDocument = (...ids: string[]) => ({ data: ids.map((id) => ({ type: 'workspaces', id })) });
    const rscSubject = await workspace('ws-rsc-subject');
    const rscConsumer = await workspace('ws-rsc-consumer');
    const rscAdded = await api(h, 'post', consumersPath(rscSubject), admin, consumersDocument(rscConsumer));
    if (rscAdded.status !== 204) throw new Error(`add a remote state consumer: ${describeResponse(rscAdded)}`);
    // Changes are refused while a workspace shares its state with the whole organization.
    const rscGlobal = await workspace('ws-rsc-global');
    const rscGlobalSet = await api(h, 'patch', `/workspaces/${rscGlobal}`, admin, {
      data: { type: 'workspaces', attributes: { 'global-remote-state': true } },
    });
    if (rscGlobalSet.status !== 200) throw new Error(`set global-remote-state: ${describeResponse(rscGlobalSet)}`);
    const rscForeign = await createWorkspace(h, patched, admin, 'ws-rsc-foreign');
    await grantWorkspace(h, admin, teamRead, rscSubject, { access: 'read' });
    const consumersSpec = (): WriteSpec => ({
      attributes: '',
      fields: {
        '/data': list(),
        '/data/0': object(),
        '/data/0/type': literal('workspaces'),
        '/data/0/id': str('id', 64, { nonEmpty: true }),
      },
      required: ['/data', '/data/0/type', '/data/0/id'],
      success: 204,
      base: async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscConsumer) }),
      fresh: async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscConsumer) }),
      failures: [
        async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscConsumer, 'ws-doesnotexist00000') }),
        async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscForeign) }),
        async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscSubject) }),
        async () => ({ path: consumersPath(rscSubject), body: consumersDocument() }),
        async () => ({ path: consumersPath(rscGlobal), body: consumersDocument(rscConsumer) }),
        async () => ({ path: consumersPath('ws-doesnotexist00000'), body: consumersDocument(rscConsumer) }),
        // Read access is not enough to change them.
        async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscConsumer), token: teamReadToken }),
      ],
    });
    SPECS['POST /workspaces/:workspace_id/relationships/remote-state-consumers'] = consumersSpec();
    SPECS['PATCH /workspaces/:workspace_id/relationships/remote-state-consumers'] = consumersSpec();

    // -- site admin: subscriptions, on an organization of their own (a free plan would limit run tasks) --
    const subscribed = await createOrganization(h, 'prop-subscribed');
    const subscribedToken = await createOrganizationToken(h, subscribed);
    const subscriptionDocument = (featureSet: string, attributes?: Record<string, unknown>) => ({
      data: {
        type: 'subscription',
        ...(attributes ? { attributes } : {}),
        relationships: { 'feature-set': { data: { type: 'feature-sets', id: featureSet } } },
      },
    });
    const subscriptionPath = `/admin/organizations/${subscribed}/subscription`;
    SPECS['POST /admin/organizations/:organization_name/subscription'] = {
      attributes: '/data/attributes',
      fields: {
        '/data': object(),
        // go-tfe sends the singular.
        '/data/type': oneOf(['subscription', 'subscriptions']),
        // Accepted and ignored (runs-ceiling, contract dates…), but an object.
        '/data/attributes': object(),
        ...attributeFields('/data/relationships', { '': object(), ...relationshipFields('feature-set', 'feature-sets') }),
      },
      required: ['/data', '/data/type', ...relationshipRequired('feature-set')],
      success: 201,
      base: async () => ({
        path: subscriptionPath,
        body: subscriptionDocument('fs-business', { 'runs-ceiling': 10, 'contract-start-at': '2026-01-01T00:00:00Z' }),
      }),
      fresh: async () => ({ path: subscriptionPath, body: subscriptionDocument('fs-standard', { 'runs-ceiling': 1 }) }),
      failures: [
        async () => ({ path: subscriptionPath, body: subscriptionDocument('fs-nope') }),
        async () => ({ path: '/admin/organizations/no-such-organization/subscription', body: subscriptionDocument('fs-free') }),
        // Site admin only: the organization's own owner token is answered like a missing resource.
        async () => ({ path: subscriptionPath, body: subscriptionDocument('fs-free'), token: subscribedToken }),
      ],
    };

    // -- site admin: an organization's admin settings (go-tfe sends no type: "") --
    const administered = await createOrganization(h, 'prop-administered');
    const administeredToken = await createOrganizationToken(h, administered);
    const adminPath = `/admin/organizations/${administered}`;
    const adminDocument = (flag: boolean) => ({
      data: {
        type: '',
        attributes: {
          'access-beta-tools': flag,
          'global-module-sharing': flag,
          'global-provider-sharing': !flag,
          'terraform-worker-sudo-enabled': flag,
        },
      },
    });
    SPECS['PATCH /admin/organizations/:organization_name'] = {
      attributes: '/data/attributes',
      fields: {
        ...resourceFields('organizations', {
          'access-beta-tools': bool,
          'global-module-sharing': bool,
          'global-provider-sharing': bool,
          'terraform-worker-sudo-enabled': bool,
        }),
        '/data/type': oneOf(['', 'organizations']),
      },
      required: ['/data', '/data/type'],
      success: 200,
      base: async () => ({ path: adminPath, body: adminDocument(true) }),
      fresh: async () => ({ path: adminPath, body: adminDocument(false) }),
      failures: [
        async () => ({ path: '/admin/organizations/no-such-organization', body: adminDocument(true) }),
        // Site admin only: the organization's own owner token is answered like a missing resource.
        async () => ({ path: adminPath, body: adminDocument(true), token: administeredToken }),
      ],
    };
  }, 60_000);

  afterAll(async () => {
    await new Promise<void>((resolve) => taskServer.close(() => resolve()));
    await h.close();
  });

  it('every write route has a body generator, and every generator a route', () => {
    const jsonKeys = JSON_WRITE_ROUTES.map(keyOf);
    const rawKeys = WRITE_ROUTES.filter((route) => route.body === 'raw').map(keyOf);
    expect(jsonKeys.filter((key) => !SPECS[key])).toEqual([]);
    expect(Object.keys(SPECS).filter((key) => !jsonKeys.includes(key))).toEqual([]);
    // Raw routes take bytes: a property of their own, and no JSON spec.
    expect(rawKeys.filter((key) => !RAW_ROUTES[key])).toEqual([]);
    expect(Object.keys(RAW_ROUTES).filter((key) => !rawKeys.includes(key))).toEqual([]);
    expect(WRITE_ROUTES.length).toBe(jsonKeys.length + rawKeys.length);
  });

  it('a configuration version needs no body: none, `{}` and an empty document get the defaults', async () => {
    const path = `/api/v2/workspaces/${wsVersions}/configuration-versions`;
    const auth = `Bearer ${h.adminToken}`;
    for (const res of [
      await h.http.post(path).set('Authorization', auth),
      await h.http.post(path).set('Authorization', auth).set('Content-Type', JSON_API).send('{}'),
      await h.http
        .post(path)
        .set('Authorization', auth)
        .set('Content-Type', 'application/json')
        .send('{"data":{"type":"configuration-versions"}}'),
    ]) {
      expect({ status: res.status, text: res.status === 201 ? '' : res.text }).toEqual({ status: 201, text: '' });
      expect(res.body.data.attributes).toMatchObject({ status: 'pending', 'auto-queue-runs': true, speculative: false });
    }
  });

  const specOf = (route: RouteDef): WriteSpec => {
    const spec = SPECS[keyOf(route)];
    if (!spec) throw new Error(`${keyOf(route)} has no WriteSpec in this file: add one`);
    return spec;
  };

  describe('1. no 5xx and no prototype pollution', () => {
    describe.each(JSON_WRITE_ROUTES.map((route) => [keyOf(route), route] as const))('%s', (key, route) => {
      it('(a) for hostile bodies', async () => {
        const spec = specOf(route);
        await fc.assert(
          fc.asyncProperty(hostileOps(spec), async (ops) => {
            const { path, body, token } = await spec.base();
            expectSane(`${key} (${path})`, await send(route, path, applyOps(body, ops), token));
          }),
          { numRuns: RUNS.hostile },
        );
      }, 120_000);

      it('(b) for mutations of a valid document', async () => {
        const spec = specOf(route);
        await fc.assert(
          fc.asyncProperty(fc.array(faults(spec), { minLength: 1, maxLength: 3 }), async (mutations) => {
            const { path, body, token } = await spec.base();
            const ops = mutations.map((fault) => fault.op);
            const res = await send(route, path, applyOps(body, ops), token);
            expectSane(`${key} (${path})`, res);
            if (res.status < 400) throw new Error(`${key}: an invalid document was accepted: ${describeResponse(res)}`);
          }),
          { numRuns: RUNS.mutations },
        );
      }, 120_000);
    });
  });

  describe('2. one wrong known field → 422 pointing at it', () => {
    it.each(JSON_WRITE_ROUTES.map((route) => [keyOf(route), route] as const))(
      '%s',
      async (key, route) => {
        const spec = specOf(route);
        await fc.assert(
          fc.asyncProperty(faults(spec), async (fault) => {
            const { path, body, token } = await spec.base();
            const res = await send(route, path, applyOps(body, [fault.op]), token);
            expectSane(key, res);
            const pointer = (res.body as { errors?: { source?: { pointer?: string } }[] }).errors?.[0]?.source?.pointer;
            // The field itself, or (inside a union) the union member that holds it.
            const expected = [fault.pointer, spec.reportedAt?.(fault.pointer) ?? fault.pointer];
            // A wrong item of a list or member of an object may be named more precisely.
            const nested = fault.kind?.type === 'stages' || fault.kind?.type === 'object' || fault.kind?.type === 'list';
            const pointsAtField = expected.some((at) => pointer === at || (nested && pointer?.startsWith(`${at}/`) === true));
            if (res.status !== 422 || !pointsAtField) {
              throw new Error(`${key}: expected 422 at ${JSON.stringify(fault.pointer)}, got ${describeResponse(res)}`);
            }
          }),
          { numRuns: RUNS.pointer },
        );
      },
      120_000,
    );
  });

  describe('3. run task descriptions are counted in code points', () => {
    /** Characters of one code point but two UTF-16 units, of one unit, and two code points that render as one. */
    const pieces = fc.oneof(
      fc.constantFrom('😀', '🚀', '𝔘', '𠜎'),
      fc.constantFrom('中', '文', '漢', '字', 'a', 'é'),
      fc.constantFrom('e\u0301', 'a\u0308', 'n\u0303', '👍🏽'),
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 2 }),
    );
    /** Exactly `length` code points, with at least one astral character and one combining mark. */
    const description = (length: number) =>
      fc.array(pieces, { minLength: 1, maxLength: 120 }).map((parts) => {
        const points = [...`😀e\u0301${parts.join('')}`];
        return Array.from({ length }, (_, index) => points[index % points.length]).join('');
      });

    it('300 code points are accepted on create and update, 301 are refused with a pointer', async () => {
      const create = JSON_WRITE_ROUTES.find((route) => keyOf(route) === 'POST /organizations/:organization_name/tasks') as RouteDef;
      const update = JSON_WRITE_ROUTES.find((route) => keyOf(route) === 'PATCH /tasks/:task_id') as RouteDef;
      await fc.assert(
        fc.asyncProperty(description(300), description(301), async (ok, tooLong) => {
          expect([...ok]).toHaveLength(300);
          expect([...tooLong]).toHaveLength(301);
          const created = await send(create, '/organizations/prop-main/tasks', {
            data: { type: 'tasks', attributes: { name: uniqueName('described'), url: taskServerUrl, category: 'task', description: ok } },
          });
          expectSane('create', created);
          expect(created.status).toBe(201);
          expect(created.body.data.attributes.description).toBe(ok);
          const taskId = created.body.data.id as string;
          const show = await api(h, 'get', `/tasks/${taskId}`, h.adminToken);
          expect(show.body.data.attributes.description).toBe(ok);

          const updated = await send(update, `/tasks/${taskId}`, {
            data: { type: 'tasks', attributes: { description: [...ok].reverse().join('') } },
          });
          expectSane('update', updated);
          expect(updated.status).toBe(200);

          for (const res of [
            await send(create, '/organizations/prop-main/tasks', {
              data: {
                type: 'tasks',
                attributes: { name: uniqueName('too-long'), url: taskServerUrl, category: 'task', description: tooLong },
              },
            }),
            await send(update, `/tasks/${taskId}`, { data: { type: 'tasks', attributes: { description: tooLong } } }),
          ]) {
            expectSane('too long', res);
            expect(res.status).toBe(422);
            expect(res.body.errors[0].source).toEqual({ pointer: '/data/attributes/description' });
          }
        }),
        { numRuns: RUNS.codePoints },
      );
    }, 120_000);
  });

  describe('4. unknown attributes are ignored', () => {
    it.each(JSON_WRITE_ROUTES.map((route) => [keyOf(route), route] as const))(
      '%s',
      async (key, route) => {
        const spec = specOf(route);
        const known = new Set(Object.keys(spec.fields).map((pointer) => segmentsOf(pointer)[segmentsOf(spec.attributes).length]));
        const extraKey = fc
          .oneof(
            fc.constantFrom(...SPECIAL_KEYS),
            fc.string({ minLength: 1, maxLength: 12 }),
            fc.string({ unit: 'grapheme', maxLength: 6 }),
            nulString,
          )
          // The body parser refuses __proto__ keys outright (400): not an attribute to ignore.
          .filter((name) => name !== '__proto__' && !known.has(name));
        const extraValue = fc
          .oneof(fc.jsonValue({ maxDepth: 3 }), nulString, protoValue, specialKeyObject)
          // …nor anywhere inside a value (fc.jsonValue generates such keys too).
          .filter((value) => !JSON.stringify(value).includes('"__proto__"'));
        await fc.assert(
          fc.asyncProperty(
            fc.uniqueArray(fc.tuple(extraKey, extraValue), { minLength: 1, maxLength: 4, selector: ([name]) => name }),
            async (extras) => {
              const { path, body, token } = await spec.fresh();
              const attributes = segmentsOf(spec.attributes);
              const document = extras.reduce((doc, [name, value]) => setAt(doc, [...attributes, name], value), body);
              const res = await send(route, path, document, token);
              expectSane(key, res);
              if (res.status !== spec.success) throw new Error(`${key} (${path}): expected ${spec.success}, got ${describeResponse(res)}`);
            },
          ),
          { numRuns: RUNS.unknownAttributes },
        );
      },
      120_000,
    );
  });

  describe('5. failed writes change nothing', () => {
    const TABLES = [
      'configuration_versions',
      'organizations',
      'teams',
      'workspaces',
      'team_workspaces',
      'run_tasks',
      'workspace_tasks',
      'runs',
      'task_stages',
      'task_results',
      'run_comments',
      'workspace_remote_state_consumers',
      'tags',
      'workspace_tags',
      'api_tokens',
      'outbox_events',
    ];
    // api_tokens.last_used_at is bookkeeping the request itself may update; its count is still compared.
    const HASHED = TABLES.filter((table) => table !== 'api_tokens');

    async function snapshot(): Promise<Record<string, string>> {
      const columns = [
        ...TABLES.map((table) => `(select count(*) from ${table})::text as "${table}"`),
        ...HASHED.map(
          (table) => `(select md5(coalesce(string_agg(x::text, '|' order by x::text), '')) from ${table} x) as "${table} content"`,
        ),
      ];
      const rows = await h.orm.em.getConnection().execute<Record<string, string>[]>(`select ${columns.join(', ')}`);
      return rows[0] as Record<string, string>;
    }

    type Failing =
      | { route: number; kind: 'mutation'; ops: Op[] }
      | { route: number; kind: 'failure'; index: number }
      | { route: number; kind: 'raw'; value: unknown };

    const failing: fc.Arbitrary<Failing> = fc.integer({ min: 0, max: JSON_WRITE_ROUTES.length - 1 }).chain((index) => {
      const spec = specOf(JSON_WRITE_ROUTES[index] as RouteDef);
      const options: fc.Arbitrary<Failing>[] = [
        fc
          .array(faults(spec), { minLength: 1, maxLength: 3 })
          .map((list): Failing => ({ route: index, kind: 'mutation', ops: list.map((fault) => fault.op) })),
        // Not an object: 400 from the parser (scalars) or 422 (arrays).
        fc
          .oneof(fc.string(), numbers, fc.boolean(), fc.constant(null), arrays, fc.constant(new Raw('{"data":')))
          .map((value): Failing => ({ route: index, kind: 'raw', value })),
      ];
      if (spec.failures.length > 0) {
        options.push(
          fc
            .integer({ min: 0, max: spec.failures.length - 1 })
            .map((failure): Failing => ({ route: index, kind: 'failure', index: failure })),
        );
      }
      return fc.oneof(...options);
    });

    it('a batch of invalid requests leaves every table as it was', async () => {
      // Make sure each route's failures are exercised at least once, whatever fc draws.
      const everyFailure: Failing[] = JSON_WRITE_ROUTES.flatMap((route, index) =>
        specOf(route).failures.map((_, failure): Failing => ({ route: index, kind: 'failure', index: failure })),
      );
      await fc.assert(
        fc.asyncProperty(fc.array(failing, { minLength: 1, maxLength: 12 }), async (batch) => {
          // Built before the snapshot: a spec's base() may set up state of its own (the callback's reopened result).
          const requests = [];
          for (const request of batch) {
            const route = JSON_WRITE_ROUTES[request.route] as RouteDef;
            const spec = specOf(route);
            const { path, body, token } =
              request.kind === 'failure' ? await (spec.failures[request.index] as () => Promise<Request>)() : await spec.base();
            const sent = request.kind === 'mutation' ? applyOps(body, request.ops) : request.kind === 'raw' ? request.value : body;
            requests.push({ route, path, sent, token });
          }
          const before = await snapshot();
          for (const { route, path, sent, token } of requests) {
            const res = await send(route, path, sent, token);
            expectSane(`${keyOf(route)} (${path})`, res);
            if (res.status < 400) throw new Error(`${keyOf(route)} (${path}): expected a failure, got ${describeResponse(res)}`);
          }
          expect(await snapshot()).toEqual(before);
        }),
        { numRuns: RUNS.failedWrites, examples: [[everyFailure]] },
      );
    }, 120_000);
  });

  describe('6. raw uploads: arbitrary bytes to a fresh upload URL', () => {
    interface RawResponse {
      status: number;
      headers: IncomingHttpHeaders;
      text: string;
    }

    /** A PUT with no Authorization header (as go-tfe sends it), with a Content-Length or chunked. */
    const rawPut = (path: string, bytes: Buffer, contentType: string | null, chunked: boolean): Promise<RawResponse> =>
      new Promise((resolve, reject) => {
        const headers: OutgoingHttpHeaders = {};
        if (contentType !== null) headers['content-type'] = contentType;
        if (!chunked) headers['content-length'] = bytes.length;
        let answered = false;
        const req = httpRequest(`${h.baseUrl}${path}`, { method: 'PUT', headers }, (res) => {
          answered = true;
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        });
        // A server answering before it read everything (413) may close the connection under the writer.
        req.on('error', (error) => {
          if (!answered) reject(error);
        });
        if (chunked) {
          const half = Math.floor(bytes.length / 2);
          req.write(bytes.subarray(0, half));
          req.end(bytes.subarray(half));
        } else {
          req.end(bytes);
        }
      });

    const createVersion = async (autoQueueRuns: boolean): Promise<{ id: string; path: string }> => {
      const res = await api(h, 'post', `/workspaces/${wsVersions}/configuration-versions`, h.adminToken, {
        data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': autoQueueRuns } },
      });
      if (res.status !== 201) throw new Error(`create a configuration version: ${describeResponse(res)}`);
      return { id: res.body.data.id as string, path: new URL(String(res.body.data.attributes['upload-url'])).pathname };
    };
    const statusOf = async (id: string): Promise<string> =>
      (await api(h, 'get', `/configuration-versions/${id}`, h.adminToken)).body.data.attributes.status as string;
    const runsOn = async (id: string): Promise<number> => {
      const [row] = await em()
        .getConnection()
        .execute<{ n: string }[]>('select count(*) as n from runs where configuration_version_id = ?', [id]);
      return Number(row?.n);
    };
    const downloadOf = (id: string) =>
      h.http
        .get(`/api/v2/configuration-versions/${id}/download`)
        .set('Authorization', `Bearer ${h.adminToken}`)
        .buffer(true)
        .parse((res, done) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => done(null, Buffer.concat(chunks)));
        });

    /** Every answer the upload route may give; a 5xx (or anything else) fails the property. */
    const ANSWERS = [200, 404, 413, 422];

    it('never a 5xx; `uploaded` only for a real .tar.gz; a failed upload leaves the version pending or errored', async () => {
      const followUp = tarGz('resource "null_resource" "follow-up" {}\n');
      const seen = new Set<string>();
      const example = (kind: string, bytes: Buffer, real = false): Upload => ({ kind, bytes, real });
      await fc.assert(
        fc.asyncProperty(uploads, uploadContentTypes, fc.boolean(), fc.boolean(), async (upload, contentType, chunked, autoQueueRuns) => {
          const { bytes } = upload;
          const context = `${upload.kind} (${bytes.length} bytes, Content-Type ${JSON.stringify(contentType)}${chunked ? ', chunked' : ''})`;
          const version = await createVersion(autoQueueRuns);
          const res = await rawPut(version.path, bytes, contentType, chunked);
          if (!ANSWERS.includes(res.status)) throw new Error(`${context} → ${res.status} ${res.text.slice(0, 300)}`);
          if (res.status >= 400) {
            const first = (JSON.parse(res.text) as { errors?: { status?: string; title?: unknown }[] }).errors?.[0];
            if (
              !String(res.headers['content-type']).includes(JSON_API) ||
              first?.status !== String(res.status) ||
              typeof first.title !== 'string'
            )
              throw new Error(`${context}: not a JSON:API error document: ${res.headers['content-type']} ${res.text.slice(0, 300)}`);
          } else {
            expect(res.text).toBe('');
          }
          expectPrototypesUntouched(context);

          const status = await statusOf(version.id);
          seen.add(`${res.status} ${status}`);
          const outcome = { context, answer: res.status, status };
          if (bytes.length > MAX_UPLOAD_BYTES) {
            // Too large: refused before anything is stored, and the URL stays usable.
            expect(outcome).toEqual({ ...outcome, answer: 413, status: 'pending' });
          } else if (res.status === 200) {
            expect(outcome).toEqual({ ...outcome, status: 'uploaded' });
          } else {
            // A fresh URL is never a 404; not gzip at all leaves the version pending, broken gzip marks it errored.
            const gzipped = bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
            expect(outcome).toEqual({ ...outcome, answer: 422, status: gzipped ? 'errored' : 'pending' });
            if (upload.real) throw new Error(`${context}: a real archive was refused: ${res.text.slice(0, 300)}`);
          }
          if (status === 'uploaded') {
            if (!tarLists(bytes)) throw new Error(`${context}: uploaded, but the system's tar cannot list it`);
            const downloaded = await downloadOf(version.id);
            expect(downloaded.status).toBe(200);
            expect(Buffer.compare(downloaded.body as Buffer, bytes)).toBe(0);
          }
          // A run is queued only for an archive that arrived, and only when asked to.
          expect({ context, runs: await runsOn(version.id) }).toEqual({ context, runs: status === 'uploaded' && autoQueueRuns ? 1 : 0 });
          // The URL works again (replacing the archive) until a run uses the version: then a 409.
          const again = await rawPut(version.path, followUp, 'application/octet-stream', false);
          if (status === 'uploaded' && autoQueueRuns) {
            expect({
              context,
              again: again.status,
              title: (JSON.parse(again.text) as { errors?: { title?: string }[] }).errors?.[0]?.title,
            }).toEqual({
              context,
              again: 409,
              title: 'conflict',
            });
          } else {
            expect({ context, again: again.status }).toEqual({ context, again: 200 });
          }
        }),
        {
          numRuns: RUNS.uploads,
          // Every outcome at least once, whatever fc draws.
          examples: [
            [example('a real archive', tarGz('resource "null_resource" "x" {}\n'), true), 'application/octet-stream', false, true],
            [example('random bytes, one too many', noiseOf(1, MAX_UPLOAD_BYTES + 1)), 'application/octet-stream', false, false],
            [example('random bytes, one too many', noiseOf(2, MAX_UPLOAD_BYTES + 1)), null, true, false],
            [example('random bytes, at the limit', noiseOf(3, MAX_UPLOAD_BYTES)), 'application/gzip', true, false],
            [example('plain text', Buffer.from('plain text, not an archive')), 'text/plain', false, false],
            [example('nothing', Buffer.alloc(0)), null, false, true],
            [example('gzip of random bytes', gzipSync(noiseOf(4, 100))), 'application/json', false, true],
            [example('gzip of 4 MiB of zeros', gzipSync(Buffer.alloc(4 * 1024 * 1024))), 'application/x-gzip', false, false],
          ],
        },
      );
      expect([...seen].sort()).toEqual(expect.arrayContaining(['200 uploaded', '413 pending', '422 errored', '422 pending']));
    }, 120_000);
  });
  describe('7. plan reports: arbitrary bodies to a local run waiting at planning', () => {
    /** A resource change with these actions, as `terraform show -json` writes one. */
    const resourceChange = fc.record({
      actions: fc.constantFrom<string[]>(
        ['create'],
        ['update'],
        ['delete'],
        ['delete', 'create'],
        ['create', 'delete'],
        ['no-op'],
        ['read'],
      ),
      data: fc.boolean(),
      importing: fc.boolean(),
    });
    /** A real plan document, with the counts HCP gives it (written here independently of the service's reading). */
    const plans = fc
      .record({ changes: fc.array(resourceChange, { maxLength: 8 }), padding: fc.nat({ max: 2 * MAX_PLAN_REPORT_BYTES }) })
      .map(({ changes, padding }) => {
        const managed = changes.filter((change) => !change.data);
        const has = (action: string) => managed.filter((change) => change.actions.includes(action)).length;
        const counts = {
          additions: has('create'),
          changes: has('update'),
          destructions: has('delete'),
          imports: managed.filter((change) => change.importing).length,
        };
        const document = {
          format_version: '1.2',
          planned_values: { root_module: {} },
          resource_changes: changes.map((change, index) => ({
            address: `${change.data ? 'data.' : ''}null_resource.r${index}`,
            mode: change.data ? 'data' : 'managed',
            change: { actions: change.actions, ...(change.importing ? { importing: { id: `i-${index}` } } : {}) },
          })),
          padding: 'x'.repeat(padding),
        };
        return { kind: 'plan' as const, text: JSON.stringify(document), counts };
      });
    /** Anything else: JSON that is no plan, broken JSON, hostile documents. */
    const others = fc.oneof(
      fc.jsonValue().map((value) => ({ kind: 'json' as const, text: JSON.stringify(value) ?? 'null' })),
      fc.string({ maxLength: 200 }).map((text) => ({ kind: 'text' as const, text })),
      fc.constantFrom(
        { kind: 'hostile' as const, text: '{"__proto__":{"polluted":1},"format_version":"1.2","resource_changes":[]}' },
        { kind: 'hostile' as const, text: '{"format_version":"1.2","resource_changes":[{"change":{"actions":["create"]},"x":"\\u0000"}]}' },
        { kind: 'hostile' as const, text: '{"format_version":"1.2","configuration":"\\ud800"}' },
        { kind: 'hostile' as const, text: `${'['.repeat(600)}${']'.repeat(600)}` },
        { kind: 'hostile' as const, text: `{"format_version":"1.2","planned_values":${'{"a":'.repeat(600)}1${'}'.repeat(600)}}` },
      ),
    );
    const contentTypes = fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'application/vnd.api+json',
      'text/plain',
      null,
    );
    const ANSWERS = [200, 400, 413, 415, 422];

    it('never a 5xx; a real plan within the limit moves the run to planned with its counts, anything else changes nothing', async () => {
      const seen = new Set<number>();
      await fc.assert(
        fc.asyncProperty(fc.oneof(plans, others), contentTypes, fc.boolean(), async (body, contentType, byRun) => {
          const runId = await createRun(h, h.adminToken, wsPlanReports);
          await em().nativeUpdate(Run, { id: runId }, { status: 'planning' });
          const run = await em().findOneOrFail(Run, { id: runId });
          const path = byRun ? `/api/v2/runs/${runId}/plan/json-output` : `/api/v2/plans/${run.planId}/json-output`;
          let req = h.http.put(path).set('Authorization', `Bearer ${h.adminToken}`);
          if (contentType !== null) req = req.set('Content-Type', contentType);
          const res = await req.send(body.text);
          const context = `${body.kind} (${body.text.length} bytes, ${String(contentType)}): ${res.status} ${res.text.slice(0, 200)}`;
          if (!ANSWERS.includes(res.status)) throw new Error(context);
          seen.add(res.status);
          expectPrototypesUntouched(context);
          const after = await em().findOneOrFail(Run, { id: runId }, { populate: ['planJson'] });
          const json = contentType === 'application/json' || contentType === 'application/json; charset=utf-8';
          if (body.kind === 'plan' && json && Buffer.byteLength(body.text) <= MAX_PLAN_REPORT_BYTES) {
            expect({ context, status: res.status, run: after.status }).toEqual({ context, status: 200, run: 'planned' });
            expect({
              additions: after.resourceAdditions,
              changes: after.resourceChanges,
              destructions: after.resourceDestructions,
              imports: after.resourceImports,
            }).toEqual(body.counts);
            expect(after.planJson).toEqual(JSON.parse(body.text));
          } else if (res.status !== 200) {
            expect({ context, run: after.status, plan: after.planJson, version: after.version }).toEqual({
              context,
              run: 'planning',
              plan: null,
              version: run.version,
            });
            expect(res.headers['content-type']).toContain(JSON_API);
          }
          if (body.kind === 'plan' && Buffer.byteLength(body.text) > MAX_PLAN_REPORT_BYTES && json) expect(res.status).toBe(413);
          if (!json) expect(res.status).toBe(415);
        }),
        { numRuns: RUNS.planReports },
      );
      expect([...seen].sort()).toEqual(expect.arrayContaining([200, 415, 422]));
    }, 120_000);
  });
});
