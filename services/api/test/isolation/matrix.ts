import { describe, expect, it } from '@jest/globals';
import { JSON_API } from '../../../../test/support/fixtures.ts';
import { ORG_A, ORG_B } from './params.ts';
import { NO_PERMISSION_TEAM_DENIED, NO_PERMISSION_TEAM_MAY_USE, OTHER_OWNER_MAY_USE, SITE_ADMIN_ONLY } from './exceptions.ts';
import { authOf, fill, keyOf, paramsOf, takesBody, TOKEN_ROUTES } from './routes.ts';
import { type IsolationContext } from './setup.ts';

/** Every token route, with every kind of credential and missing id. */
export function describeTokenMatrix(g: IsolationContext): void {
  const { call, missingVariants, expectNotFound, expectUnauthorized, expectNoLeak, garbage } = g;

  describe.each(TOKEN_ROUTES.map((route) => [keyOf(route), route] as const))('%s', (key, route) => {
    it('no token → 401, for real and for missing ids', async () => {
      expectUnauthorized(await call(route, g.real), 'real ids');
      for (const variant of missingVariants(route)) expectUnauthorized(await call(route, variant.values), variant.label);
    });

    it('garbage, revoked and non-bearer credentials → the same 401', async () => {
      for (const [label, header] of garbage()) expectUnauthorized(await call(route, g.real, header), label);
    });

    if (takesBody(route)) {
      it('no token → 401 whatever the body (auth runs before body handling)', async () => {
        const path = `/api/v2${fill(route, g.real)}`;
        const method = route.method.toLowerCase() as 'post' | 'patch' | 'put';
        expectUnauthorized(await g.h.http[method](path).set('Content-Type', JSON_API).send('{"data": '), 'malformed JSON');
        expectUnauthorized(await g.h.http[method](path).set('Content-Type', 'text/plain').send('hello'), 'text/plain');
        expectUnauthorized(await g.h.http[method](path).set('Content-Type', JSON_API).send('{"data": {}}'), 'invalid document');
      });
    }

    const otherOwner = OTHER_OWNER_MAY_USE[key];
    if (otherOwner) {
      it(`organization B's owner: allowed (${otherOwner.reason})`, async () => {
        const res = await call(route, g.real, `Bearer ${g.b.organizationToken}`);
        expect(res.status).toBe(200);
        otherOwner.check(res);
        expectNoLeak(res, [ORG_A, ...Object.values(g.real)]);
      });
    } else {
      it("organization B's owner → 404", async () => {
        expectNotFound(await call(route, g.real, `Bearer ${g.b.organizationToken}`), 'B owner');
      });
    }

    const teamAllowed = NO_PERMISSION_TEAM_MAY_USE[key];
    if (teamAllowed) {
      it(`A's team without permissions: allowed (${teamAllowed.reason})`, async () => {
        const res = await call(route, g.real, `Bearer ${g.noPermissionTeamToken}`);
        expect(res.status).toBe(200);
        teamAllowed.check(res);
        expectNoLeak(res, [
          ORG_B,
          g.real.workspace_id,
          g.real.workspace_name,
          g.real.id,
          g.real.run_id,
          g.real.plan_id,
          g.real.apply_id,
          g.real.task_id,
          g.real.workspace_task_id,
          g.real.task_stage_id,
          g.real.task_result_id,
          g.real.outcome_id,
          g.real.comment_id,
          g.real.run_event_id,
          g.real.configuration_version_id,
          g.grantedTeamId,
          g.allAccessTeamId,
        ]);
      });
    } else {
      it(`A's team without permissions → 404${NO_PERMISSION_TEAM_DENIED[key] ? ` (${NO_PERMISSION_TEAM_DENIED[key]})` : ''}`, async () => {
        expectNotFound(await call(route, g.real, `Bearer ${g.noPermissionTeamToken}`), 'no-permission team');
      });
    }

    if (paramsOf(route).length > 0) {
      it("nonexistent ids with A's owner token → 404", async () => {
        for (const variant of missingVariants(route)) {
          expectNotFound(await call(route, variant.values, `Bearer ${g.a.organizationToken}`), variant.label);
        }
      });
    }

    const adminOnly = SITE_ADMIN_ONLY[key];
    if (adminOnly) {
      it("A's owner and A's team with every organization permission → 404 (site admin only)", async () => {
        for (const [label, token] of [
          ["A's owner", g.a.organizationToken],
          ["A's team with every organization permission", g.allAccessTeamToken],
        ]) {
          expectNotFound(await call(route, g.real, `Bearer ${token}`), label);
          for (const variant of missingVariants(route)) {
            expectNotFound(await call(route, variant.values, `Bearer ${token}`), `${label}, ${variant.label}`);
          }
        }
      });

      it(`the site admin: allowed (${adminOnly.reason})`, async () => {
        const values = adminOnly.values ? { ...g.real, ...(await adminOnly.values(g.h)) } : g.real;
        const res = await call(route, values, `Bearer ${g.h.adminToken}`);
        expect({ status: res.status, type: res.headers['content-type'] }).toEqual({
          status: adminOnly.status,
          type: adminOnly.status === 204 ? undefined : expect.stringContaining(JSON_API),
        });
        adminOnly.check(res);
      });

      if (paramsOf(route).length > 0) {
        it("nonexistent ids with the site admin's token → 404", async () => {
          for (const variant of missingVariants(route)) {
            expectNotFound(await call(route, variant.values, `Bearer ${g.h.adminToken}`), variant.label);
          }
        });
      }
    }

    if (authOf(route) === 'token-or-task') {
      it("organization B's task access token → 404 (it reads its own run only)", async () => {
        expectNotFound(await call(route, g.real, `Bearer ${g.otherTaskToken}`), "B's task token");
        for (const variant of missingVariants(route)) {
          expectNotFound(await call(route, variant.values, `Bearer ${g.otherTaskToken}`), `B's task token, ${variant.label}`);
        }
      });
    } else {
      it('a live task access token is no API token → 401', async () => {
        expectUnauthorized(await call(route, g.real, `Bearer ${g.otherTaskToken}`), "B's task token");
      });
    }
  });
}
