import { describe, expect, it } from '@jest/globals';
import { ROUTES } from '../../src/routes/index.ts';
import { api } from '../../../../test/support/fixtures.ts';
import { isKnownParam, type ParamName } from './params.ts';
import { BODIES, RAW_JSON_ROUTES } from './bodies.ts';
import {
  isAdminRoute,
  isConfigurationVersionRoute,
  isRunTaskRoute,
  NO_PERMISSION_TEAM_DENIED,
  NO_PERMISSION_TEAM_MAY_USE,
  OTHER_OWNER_MAY_USE,
  PUBLIC_ROUTES,
  PROVEN_BY_IDEMPOTENT_WRITE,
  PUBLIC_ROUTES_WITH_OWN_TESTS,
  SITE_ADMIN_ONLY,
  TASK_TOKEN_ONLY_ROUTES,
} from './exceptions.ts';
import { authOf, CALLBACK_ROUTES, keyOf, KNOWN_AUTH, paramsOf, pathParams, takesBody, TOKEN_ROUTES } from './routes.ts';
import { type IsolationContext } from './setup.ts';

/** The route table itself: every parameter, body and exception is known and current. */
export function describeRouteTable(g: IsolationContext): void {
  const { call, expectNotFound } = g;
  describe('route table', () => {
    it('knows how to fill every parameter and body of every route', () => {
      const problems: string[] = [];
      for (const route of ROUTES) {
        for (const name of pathParams(route)) if (!isKnownParam(name)) problems.push(`${keyOf(route)}: unknown parameter :${name}`);
        if (route.auth === 'token' && takesBody(route) && !BODIES[keyOf(route)])
          problems.push(`${keyOf(route)}: no request body in BODIES`);
        if (route.auth === 'public' && !PUBLIC_ROUTES[keyOf(route)])
          problems.push(`${keyOf(route)}: public but not listed in PUBLIC_ROUTES`);
        if (route.auth === 'public' && takesBody(route) && !PUBLIC_ROUTES_WITH_OWN_TESTS.includes(keyOf(route)))
          problems.push(`${keyOf(route)}: a public route with a body needs tests of its own here`);
        if (route.body === 'raw' && route.auth !== 'public' && !RAW_JSON_ROUTES.includes(keyOf(route)))
          problems.push(`${keyOf(route)}: a raw body on a ${route.auth} route; the matrix sends JSON bodies only`);
        if (isAdminRoute(route) && !SITE_ADMIN_ONLY[keyOf(route)])
          problems.push(`${keyOf(route)}: a site-admin route not listed in SITE_ADMIN_ONLY`);
        if (authOf(route) === 'callback' && !TASK_TOKEN_ONLY_ROUTES[keyOf(route)])
          problems.push(`${keyOf(route)}: callback but not listed in TASK_TOKEN_ONLY_ROUTES`);
        if (authOf(route) === 'callback' && takesBody(route) && !BODIES[keyOf(route)])
          problems.push(`${keyOf(route)}: no request body in BODIES`);
        if (!KNOWN_AUTH.includes(authOf(route))) problems.push(`${keyOf(route)}: auth '${authOf(route)}' unknown to the matrix`);
      }
      expect(problems).toEqual([]);
    });

    it('lists no stale exceptions or bodies (every key names a route)', () => {
      const keys = new Set(ROUTES.map(keyOf));
      const listed = [
        ...Object.keys(BODIES),
        ...Object.keys(PUBLIC_ROUTES),
        ...Object.keys(NO_PERMISSION_TEAM_MAY_USE),
        ...Object.keys(OTHER_OWNER_MAY_USE),
        ...Object.keys(NO_PERMISSION_TEAM_DENIED),
        ...Object.keys(TASK_TOKEN_ONLY_ROUTES),
        ...Object.keys(SITE_ADMIN_ONLY),
        ...PUBLIC_ROUTES_WITH_OWN_TESTS,
        ...PROVEN_BY_IDEMPOTENT_WRITE,
      ];
      expect(listed.filter((key) => !keys.has(key))).toEqual([]);
      expect(ROUTES.filter((route) => !KNOWN_AUTH.includes(authOf(route)))).toEqual([]);
      expect(Object.keys(TASK_TOKEN_ONLY_ROUTES).filter((key) => !CALLBACK_ROUTES.some((route) => keyOf(route) === key))).toEqual([]);
      expect(TOKEN_ROUTES.length).toBeGreaterThan(0);
      expect(PUBLIC_ROUTES_WITH_OWN_TESTS.filter((key) => !PUBLIC_ROUTES[key])).toEqual([]);
      expect(Object.keys(SITE_ADMIN_ONLY).filter((key) => !TOKEN_ROUTES.some((route) => keyOf(route) === key))).toEqual([]);
    });

    it('decides explicitly for every run task route that the team without permissions may not use it', () => {
      const runTaskRoutes = TOKEN_ROUTES.filter(isRunTaskRoute).map(keyOf);
      expect(runTaskRoutes.length).toBeGreaterThanOrEqual(17);
      expect(runTaskRoutes).toContain('GET /task-results/:task_result_id/delivery-attempts');
      expect(runTaskRoutes.filter((key) => !NO_PERMISSION_TEAM_DENIED[key])).toEqual([]);
      // …and for every configuration version and site-admin route.
      const otherFamilies = TOKEN_ROUTES.filter((route) => isConfigurationVersionRoute(route) || isAdminRoute(route)).map(keyOf);
      expect(otherFamilies.length).toBeGreaterThanOrEqual(6);
      expect(otherFamilies.filter((key) => !NO_PERMISSION_TEAM_DENIED[key])).toEqual([]);
      expect(Object.keys(NO_PERMISSION_TEAM_DENIED).filter((key) => NO_PERMISSION_TEAM_MAY_USE[key])).toEqual([]);
      expect(Object.keys(NO_PERMISSION_TEAM_MAY_USE).filter((key) => runTaskRoutes.includes(key))).toEqual([]);
    });

    it('has fixtures for every parameter: A owner (the site admin on site-admin routes) reads every GET route with real values', async () => {
      const used = new Set<ParamName>();
      for (const route of TOKEN_ROUTES.filter((candidate) => candidate.method === 'GET')) {
        const token = SITE_ADMIN_ONLY[keyOf(route)] ? g.h.adminToken : g.a.organizationToken;
        const res = await call(route, g.real, `Bearer ${token}`);
        expect({ route: keyOf(route), status: res.status }).toEqual({ route: keyOf(route), status: 200 });
        for (const param of paramsOf(route)) used.add(param);
      }
      // A tag has no GET route of its own (nor has it in HCP): tagging A's workspace with the tag it already
      // has proves the tag real and changes nothing (the snapshot at the end says so).
      for (const route of TOKEN_ROUTES.filter((candidate) => PROVEN_BY_IDEMPOTENT_WRITE.includes(keyOf(candidate)))) {
        const res = await call(route, g.real, `Bearer ${g.a.organizationToken}`);
        expect({ route: keyOf(route), status: res.status }).toEqual({ route: keyOf(route), status: 204 });
        for (const param of paramsOf(route)) used.add(param);
      }
      // Every parameter kind a mutating route uses was proven real by some GET route above.
      const all = new Set([...TOKEN_ROUTES, ...CALLBACK_ROUTES].flatMap(paramsOf));
      expect([...all].filter((param) => !used.has(param))).toEqual([]);
    });

    it('one 404 body for an unknown route and a missing resource, one 401 body', async () => {
      expect(JSON.parse(g.notFoundText)).toEqual({ errors: [{ status: '404', title: 'not found' }] });
      const unknown = await api(g.h, 'get', '/no-such-route', g.a.organizationToken);
      expectNotFound(unknown, 'unknown route');
      expect(JSON.parse(g.unauthorizedText)).toEqual({ errors: [{ status: '401', title: 'unauthorized' }] });
    });
  });
}
