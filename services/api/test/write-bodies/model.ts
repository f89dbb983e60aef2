import { ROUTES } from '../../src/routes/index.ts';
import { type RouteDef } from '../../src/routes/define.ts';
import { Raw } from '../../../../test/support/raw-json.ts';

/** The documents sent to write routes, and the model of every known field that WriteSpecs describe. */

// ---------------------------------------------------------------------------------------------
// Bodies: JSON values, plus Raw fragments spliced in verbatim by `encode` (test/support/raw-json.ts).

/** `depth` nested objects (the outermost is level 1) around the number 1. */
export const deepObject = (depth: number): Raw => new Raw('{"a":'.repeat(depth) + '1' + '}'.repeat(depth));
export const deepArray = (depth: number): Raw => new Raw('['.repeat(depth) + '1' + ']'.repeat(depth));

export type Segments = readonly string[];
export const segmentsOf = (pointer: string): string[] => (pointer === '' ? [] : pointer.slice(1).split('/'));
export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
/** An object or array to descend into (a Raw fragment is a leaf). */
export const isContainer = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !(value instanceof Raw);

/** Sets an own property (even `__proto__`), creating missing parents. */
export function setAt(document: unknown, path: Segments, value: unknown): unknown {
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

export function dropAt(document: unknown, path: Segments): unknown {
  let node = document;
  // Through arrays too: a member of a list's item (`/data/0/id`) can be required.
  for (const key of path.slice(0, -1)) node = isContainer(node) && Object.hasOwn(node, key) ? node[key] : undefined;
  if (isRecord(node)) delete node[path[path.length - 1] as string];
  return document;
}

export type Op = { op: 'root'; value: unknown } | { op: 'set'; path: Segments; value: unknown } | { op: 'drop'; path: Segments };

/** A copy that keeps own `__proto__` keys and Raw fragments (generated values are shallow). */
export function copy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copy);
  if (!isContainer(value)) return value;
  return Object.keys(value).reduce<unknown>((result, key) => setAt(result, [key], copy(value[key])), {});
}

/** Applies the operations to a copy of `base`; generated values are copied too, never changed in place. */
export function applyOps(base: unknown, ops: readonly Op[]): unknown {
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

export type Flavor = 'name' | 'text' | 'email' | 'url' | 'version' | 'id';
/** String lengths are counted in code points (zod here, and PostgreSQL varchar, count characters). */
export type Kind =
  | { type: 'string'; flavor: Flavor; max: number; nullable: boolean; nonEmpty: boolean }
  | { type: 'datetime'; nullable: boolean }
  | { type: 'boolean' }
  | { type: 'enum'; values: readonly string[] }
  | { type: 'literal'; value: string }
  | { type: 'object'; nullable: boolean; planJson?: boolean }
  | { type: 'stages'; nonEmpty: boolean }
  | { type: 'list'; nullable: boolean };

export const str = (flavor: Flavor, max: number, options: { nullable?: boolean; nonEmpty?: boolean } = {}): Kind => ({
  type: 'string',
  flavor,
  max,
  nullable: options.nullable ?? false,
  nonEmpty: options.nonEmpty ?? flavor === 'name',
});
export const bool: Kind = { type: 'boolean' };
export const oneOf = (values: readonly string[]): Kind => ({ type: 'enum', values });
export const literal = (value: string): Kind => ({ type: 'literal', value });
export const object = (nullable = false): Kind => ({ type: 'object', nullable });
export const datetime = (nullable: boolean): Kind => ({ type: 'datetime', nullable });
export const stages = (nonEmpty: boolean): Kind => ({ type: 'stages', nonEmpty });
export const list = (nullable = false): Kind => ({ type: 'list', nullable });

export interface Request {
  path: string;
  body: unknown;
  /** The bearer token, when not the admin token. */
  token?: string;
}

export interface WriteSpec {
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

export const attributeFields = (prefix: string, fields: Record<string, Kind>): Record<string, Kind> =>
  Object.fromEntries(Object.entries(fields).map(([name, kind]) => [name === '' ? prefix : `${prefix}/${name}`, kind]));

export function resourceFields(
  type: string,
  attributes: Record<string, Kind>,
  relationships: Record<string, Kind> = {},
): Record<string, Kind> {
  return {
    '/data': object(),
    '/data/type': literal(type),
    '/data/attributes': object(),
    ...attributeFields('/data/attributes', attributes),
    ...attributeFields('/data/relationships', relationships),
  };
}

export function relationshipFields(name: string, type: string, options: { max?: number; nullable?: boolean; nonEmpty?: boolean } = {}) {
  return {
    [name]: object(),
    [`${name}/data`]: object(options.nullable ?? false),
    [`${name}/data/type`]: literal(type),
    [`${name}/data/id`]: str('id', options.max ?? 64, { nonEmpty: options.nonEmpty ?? true }),
  };
}

export const relationshipRequired = (name: string): string[] => [
  '/data/relationships',
  `/data/relationships/${name}`,
  `/data/relationships/${name}/data`,
  `/data/relationships/${name}/data/type`,
  `/data/relationships/${name}/data/id`,
];

export const FUTURE = '2099-01-01T00:00:00Z';

// ---------------------------------------------------------------------------------------------

/** Runs per property (per route where the property is per route): the whole file takes ~20 s. */
export const RUNS = {
  hostile: 50,
  mutations: 50,
  pointer: 80,
  codePoints: 80,
  unknownAttributes: 20,
  failedWrites: 50,
  uploads: 60,
  planReports: 60,
};

export const keyOf = (route: RouteDef): string => `${route.method} ${route.path}`;
export const WRITE_ROUTES = ROUTES.filter((route) => ['POST', 'PATCH', 'PUT'].includes(route.method));
/** Write routes whose body is bytes (`body: 'raw'`): each has a property of its own (6.), not a WriteSpec. */
export const RAW_ROUTES: Record<string, string> = {
  'PUT /uploads/configuration-versions/:upload_token': 'property 6: a configuration archive PUT to its upload URL',
  'PUT /plans/:plan_id/json-output': "property 7: a local run's plan JSON, reported by its pipeline",
  'PUT /runs/:run_id/plan/json-output': "property 7: a local run's plan JSON, reported by its pipeline",
};
/**
 * Write routes whose WriteSpecs are still to be written (a known debt; none today): until then their
 * bodies are covered by the fuzz suite's random bodies (test/faults/fuzz.faults.test.ts: no 5xx, nothing
 * changed by a refusal) and their rules by their own route tests, named here. The coverage test keeps
 * this list to real routes.
 */
export const SPECS_TO_WRITE: Record<string, string> = {};
/** Properties 1 to 5 cover every write route with a JSON body (but those of SPECS_TO_WRITE). */
export const JSON_WRITE_ROUTES = WRITE_ROUTES.filter((route) => route.body !== 'raw' && !(keyOf(route) in SPECS_TO_WRITE));
