import { z } from 'zod';

/** `true`/`false`, also as strings: HCP's own samples send strings for booleans. */
export const flexibleBoolean = z.union([z.boolean(), z.enum(['true', 'false']).transform((value) => value === 'true')]);

export const NO_NUL = 'must not contain NUL characters';
export const WELL_FORMED = 'must be well-formed Unicode (no unpaired surrogate escapes)';

/**
 * PostgreSQL text cannot hold NUL, and JSON(B) cannot hold an unpaired surrogate (a `\ud800` escape in
 * the body): rejecting both here keeps a driver error (a 500) out of reach.
 */
export const safeText = (max: number) =>
  z
    .string()
    .max(max, `must be at most ${max} characters`)
    .refine((value) => !value.includes('\u0000'), NO_NUL)
    .refine((value) => value.isWellFormed(), WELL_FORMED);

export const identifier = (type: string) => z.object({ type: z.literal(type), id: safeText(64).min(1) });

export const relationshipTo = (type: string) => z.object({ data: identifier(type) });

/** `{ data: { type, attributes, relationships } }`; unknown attributes are ignored, as HCP does. */
export function resourceDocument<A extends z.ZodType, R extends z.ZodType>(type: string, attributes: A, relationships: R) {
  return z.object({
    data: z.object({
      type: z.literal(type),
      id: z.string().optional(),
      attributes,
      relationships,
    }),
  });
}

export const noRelationships = z.unknown().optional();

export const NAME_PATTERN = /^[A-Za-z0-9_-]+$/;
export const nameSchema = (max: number) =>
  z
    .string()
    .min(1, 'must not be empty')
    .max(max, `must be at most ${max} characters`)
    .regex(NAME_PATTERN, 'may only contain letters, numbers, - and _');

/** Characters as people (and HCP's Rails) count them: code points, not bytes or UTF-16 units. */
export const characters = (max: number) =>
  z
    .string()
    .refine((value) => [...value].length <= max, `must be at most ${max} characters`)
    .refine((value) => !value.includes('\u0000'), NO_NUL)
    .refine((value) => value.isWellFormed(), WELL_FORMED);

/** The URL when it is an absolute http(s) URL with a host, else undefined. */
function parseHttpUrl(value: string): URL | undefined {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname.length > 0 ? url : undefined;
  } catch {
    return undefined;
  }
}

export const httpUrl = z
  .string()
  .max(2048, 'must be at most 2048 characters')
  // The URL parser percent-encodes a NUL, but the value is stored as given: PostgreSQL text cannot hold it.
  .refine((value) => !value.includes('\u0000'), NO_NUL)
  .refine((value) => parseHttpUrl(value) !== undefined, 'must be an http or https URL');

/**
 * A task's URL: credentials in it (`http://user:secret@host/`) are never sent (requests are signed with
 * the HMAC key instead), and anyone who can read a run would see them, so they are refused.
 */
export const taskUrl = httpUrl.refine((value) => {
  const url = parseHttpUrl(value);
  return url === undefined || (url.username === '' && url.password === '');
}, 'must not contain a user name or password: they are never sent, and readers of runs would see them (the HMAC key authenticates requests)');

/**
 * A link a task server gives (a callback's or an outcome's `url`), which UIs render as a link: http or
 * https only, so that no `javascript:` or `data:` URL is served back. Empty stays allowed, as before.
 */
export const linkUrl = safeText(2048).refine((value) => value === '' || parseHttpUrl(value) !== undefined, 'must be an http or https URL');

/** A list without repeats: a stage given twice is a client mistake, not something to deduplicate silently. */
export const distinctList = <T extends z.ZodType>(item: T) =>
  z.array(item).refine((values) => new Set(values).size === values.length, 'must not repeat a value');

/** How deep a plan document may nest: JSON.stringify (MikroORM, Koa, the worker) recurses, and a few thousand levels overflow the stack. */
export const MAX_PLAN_DEPTH = 512;

/** Whether a value nests objects or arrays deeper than `max` levels (the value itself is level 1); iterative. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const pending: [unknown, number][] = [[value, 1]];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [item, depth] = next;
    if (item === null || typeof item !== 'object') continue;
    if (depth > max) return true;
    for (const child of Object.values(item)) pending.push([child, depth + 1]);
  }
  return false;
}

/** Whether any key or string of a JSON value matches: iterative, so deep nesting cannot overflow the stack. */
export function someString(value: unknown, matches: (text: string) => boolean): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string') {
      if (matches(item)) return true;
    } else if (item !== null && typeof item === 'object') {
      for (const [key, child] of Object.entries(item)) {
        if (matches(key)) return true;
        pending.push(child);
      }
    }
  }
  return false;
}

/** The longest comment kept on a run, written through the comments API or given to an action. */
export const COMMENT_MAX = 10_000;

// Not a union with z.undefined(): a union reports any failure at the document root, losing the pointer.
export const actionSchema = z.object({ comment: safeText(COMMENT_MAX).nullable().optional() }).optional();

/** go-tfe sends plain JSON to a stage's override, not a JSON:API document: `{}` or `{"comment": "…"}`. */
export const overrideSchema = actionSchema;
