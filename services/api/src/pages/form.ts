import type { ApiContext } from '../context.ts';
import { readRawBody } from '../http/raw-body.ts';
import { pageError } from './errors.ts';

/** Forms here are small (a token, a comment of at most 10,000 characters, a CSRF token). */
const FORM_LIMIT = 64 * 1024;

/** An HTML form's fields (application/x-www-form-urlencoded); any other body is a 415. */
export async function readForm(ctx: ApiContext): Promise<Map<string, string>> {
  const type = (ctx.get('content-type').split(';')[0] ?? '').trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') throw pageError(415, 'Send this form from its page.');
  const body = await readRawBody(ctx.req, FORM_LIMIT);
  const fields = new Map<string, string>();
  // The first value of a repeated field counts; the rest are ignored, as browsers never send them.
  for (const [name, value] of new URLSearchParams(body.toString('utf8'))) if (!fields.has(name)) fields.set(name, value);
  return fields;
}
