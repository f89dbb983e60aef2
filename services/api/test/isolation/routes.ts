import { ROUTES } from '../../src/routes/index.ts';
import { type RouteDef } from '../../src/routes/define.ts';
import { isKnownParam, type ParamName, type Values } from './params.ts';
import { BODIES } from './bodies.ts';

/** The route table as the matrix reads it: keys, parameters, bodies and auth kinds. */

export const keyOf = (route: RouteDef): string => `${route.method} ${route.path}`;
export const pathParams = (route: RouteDef): string[] => [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => match[1] ?? '');
export const takesBody = (route: RouteDef): boolean => ['POST', 'PATCH', 'PUT'].includes(route.method);

export function paramsOf(route: RouteDef): ParamName[] {
  const names = [...pathParams(route), ...(BODIES[keyOf(route)]?.params ?? [])];
  return names.map((name) => {
    if (!isKnownParam(name))
      throw new Error(`${keyOf(route)}: the isolation matrix cannot fill :${name}; add it to MISSING and to the fixtures`);
    return name;
  });
}

export function fill(route: RouteDef, values: Values): string {
  return route.path.replaceAll(/:([A-Za-z0-9_]+)/g, (_, name: string) => {
    if (!isKnownParam(name)) throw new Error(`${keyOf(route)}: the isolation matrix cannot fill :${name}`);
    return encodeURIComponent(values[name]);
  });
}

export function bodyOf(route: RouteDef, values: Values): unknown {
  if (!takesBody(route)) return undefined;
  const spec = BODIES[keyOf(route)];
  if (!spec) throw new Error(`${keyOf(route)}: the isolation matrix has no request body for this route; add one to BODIES`);
  return spec.body(values);
}

/** Read as a string: the matrix must also recognise (and reject) auth kinds it does not know yet. */
export const authOf = (route: RouteDef): string => route.auth;
/** Routes taking API tokens: 'token-or-task' ones also take a task result's access token (checked below). */
export const TOKEN_ROUTES = ROUTES.filter((route) => authOf(route) === 'token' || authOf(route) === 'token-or-task');
export const CALLBACK_ROUTES = ROUTES.filter((route) => authOf(route) === 'callback');
/**
 * 'audit-trail' (GET /organization/audit-trail) names no resource by id: the organization is the
 * token's. Its refusals (other organizations, teams, the site admin, no token) are audit-trail.int.test.ts's.
 */
export const KNOWN_AUTH = ['public', 'token', 'token-or-task', 'callback', 'audit-trail'];

/** The upload limit of this file's API (CONFIGURATION_VERSION_MAX_BYTES): small, so an oversize upload is cheap. */
export const MAX_UPLOAD_BYTES = 16 * 1024;
