import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { type RouteDef } from '../../src/routes/define.ts';
import { api } from '../../../../test/support/fixtures.ts';
import { type Response, uniqueName } from '../../../../test/support/assertions.ts';
import { Raw } from '../../../../test/support/raw-json.ts';
import { applyOps, JSON_WRITE_ROUTES, keyOf, type Op, type Request, RUNS, segmentsOf, setAt, type WriteSpec } from './model.ts';
import { arrays, numbers, taskServerUrl } from './wrong-values.ts';
import { describeResponse, expectSane, faults, hostileOps, nulString, protoValue, SPECIAL_KEYS, specialKeyObject } from './hostile.ts';
import { sendBody, type WriteContext } from './fixtures.ts';

/** Properties 1 to 5, over every write route with a JSON body. */
export function describeJsonProperties(ctx: WriteContext): void {
  const send = (route: RouteDef, path: string, body: unknown, token?: string): Promise<Response> =>
    sendBody(ctx.h, route, path, body, token);
  const specOf = (route: RouteDef): WriteSpec => {
    const spec = ctx.specs[keyOf(route)];
    if (!spec) throw new Error(`${keyOf(route)} has no WriteSpec in write-bodies/*.specs.ts: add one`);
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
          const show = await api(ctx.h, 'get', `/tasks/${taskId}`, ctx.h.adminToken);
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
      'users',
      'organization_memberships',
      'team_memberships',
      'ci_trust_rules',
      'notification_configurations',
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
      const rows = await ctx.h.orm.em.getConnection().execute<Record<string, string>[]>(`select ${columns.join(', ')}`);
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
}
