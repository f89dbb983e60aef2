import { z } from 'zod';
import { COMPONENT_NAME, type JsonSchema } from './types.ts';

// zod → JSON Schema: every request body is described by the very schema that validates it.

export interface Converted {
  schema: JsonSchema;
  /** `$defs` (recursive or registered schemas), to be hoisted into components.schemas. */
  defs: Record<string, JsonSchema>;
  notes: string[];
}

type ZodInternal = { _zod: { def: { type: string; checks?: { _zod: { def: { check: string; error?: unknown } } }[] } } };

/** The messages of `.refine()` checks: JSON Schema cannot express them, so they go into the description. */
function refinementMessages(schema: unknown): string[] {
  const checks = (schema as ZodInternal)._zod.def.checks ?? [];
  const messages: string[] = [];
  for (const check of checks) {
    const def = check._zod.def;
    if (def.check !== 'custom') continue;
    let message: string | undefined;
    try {
      const result: unknown = typeof def.error === 'function' ? def.error({ code: 'custom', input: undefined, path: [] }) : def.error;
      message = typeof result === 'string' ? result : (result as { message?: string } | undefined)?.message;
    } catch {
      message = undefined;
    }
    messages.push(message ?? 'a custom check');
  }
  return messages;
}

function addRefinements(schema: unknown, json: JsonSchema): void {
  const messages = refinementMessages(schema);
  if (messages.length === 0) return;
  const note = `Also checked: ${messages.join('; ')}.`;
  const current = typeof json['description'] === 'string' ? json['description'] : '';
  // The override can run more than once on the same object: add the note once.
  if (!current.includes(note)) json['description'] = current ? `${current} ${note}` : note;
}

function pointerOf(path: readonly (string | number)[]): string {
  return '/' + path.map(String).join('/');
}

export function convert(schema: z.ZodType): Converted {
  const notes: string[] = [];
  try {
    const json = z.toJSONSchema(schema, {
      target: 'draft-2020-12',
      io: 'input',
      unrepresentable: ({ zodSchema, path, message }) => {
        // `z.undefined()` in a union means "no body": it matches no JSON value (the body's `required` says it may be absent).
        if (zodSchema._zod.def.type === 'undefined') return { not: {} };
        notes.push(`${pointerOf(path)}: ${message}`);
        return 'any';
      },
      override: ({ zodSchema, jsonSchema }) => addRefinements(zodSchema, jsonSchema as JsonSchema),
    }) as JsonSchema;
    const { $schema: _dialect, $defs, ...rest } = json;
    return { schema: rest, defs: ($defs ?? {}) as Record<string, JsonSchema>, notes };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    notes.push(`/: not convertible (${reason})`);
    return { schema: { description: `The request schema could not be converted to JSON Schema: ${reason}` }, defs: {}, notes };
  }
}

/** Applies `visit` to every schema object in the tree, bottom-up; its result replaces the node. */
function mapSchemas(node: unknown, visit: (schema: JsonSchema) => JsonSchema): unknown {
  if (Array.isArray(node)) return node.map((item) => mapSchemas(item, visit));
  if (node === null || typeof node !== 'object') return node;
  const mapped: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    // `const`, `default`, `enum` and `examples` hold values, not schemas.
    mapped[key] = key === 'const' || key === 'default' || key === 'enum' || key === 'examples' ? value : mapSchemas(value, visit);
  }
  return visit(mapped);
}

const isNever = (value: unknown): boolean =>
  typeof value === 'object' &&
  value !== null &&
  Object.keys(value).length === 1 &&
  'not' in value &&
  Object.keys((value as JsonSchema)['not'] as object).length === 0;

/** Drops `{not: {}}` members of `anyOf` (from `z.undefined()`), unwrapping a single survivor. */
function dropNever(schema: JsonSchema): JsonSchema {
  const anyOf = schema['anyOf'];
  if (!Array.isArray(anyOf) || !anyOf.some(isNever)) return schema;
  const kept = anyOf.filter((member) => !isNever(member));
  const { anyOf: _dropped, ...rest } = schema;
  if (kept.length === 0) return { ...rest, not: {} };
  if (kept.length === 1) return { ...(kept[0] as JsonSchema), ...rest };
  return { ...rest, anyOf: kept };
}

/** Places a converted schema under components.schemas[name], its `$defs` beside it, with every `$ref` rewritten to match. */
export function register(schemas: Record<string, JsonSchema>, name: string, converted: Converted): void {
  const defName = (def: string): string => `${name}.${def}`.replace(COMPONENT_NAME, '_');
  const rewrite = (schema: JsonSchema): JsonSchema => {
    const target = schema['$ref'];
    if (typeof target !== 'string') return dropNever(schema);
    if (target === '#') return dropNever({ ...schema, $ref: `#/components/schemas/${name}` });
    if (target.startsWith('#/$defs/')) {
      return dropNever({ ...schema, $ref: `#/components/schemas/${defName(decodeURIComponent(target.slice('#/$defs/'.length)))}` });
    }
    return dropNever(schema);
  };
  schemas[name] = mapSchemas(converted.schema, rewrite) as JsonSchema;
  for (const [def, schema] of Object.entries(converted.defs)) schemas[defName(def)] = mapSchemas(schema, rewrite) as JsonSchema;
}

/** Whether the schema accepts a request without a body (a union with `z.undefined()`, `.optional()`). */
export function acceptsNoBody(schema: z.ZodType): boolean {
  try {
    return schema.safeParse(undefined).success;
  } catch {
    return false;
  }
}
