import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DB_NOW_ISO, nativePool } from '@runtasks/shared/db';
import { api, createRun, JSON_API, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { CHANGING_PLAN } from '../../../test/support/plan-documents.ts';

/**
 * JSON bodies as the service reads them (docs/limits-and-security.md, "JSON bodies"), against the API
 * with its default settings: bytes that are not UTF-8 and numbers that cannot be kept as sent are 422s
 * that say where, never a 500 and never a silently changed value.
 */
describe('JSON bodies: UTF-8 and numbers', () => {
  let h: Harness;
  let f: Fixture;
  let localWorkspaceId: string;

  beforeAll(async () => {
    h = await startHarness({ ops: true });
    f = await seedOrganization(h, 'json-input');
    const created = await api(h, 'post', `/organizations/${f.organization}/workspaces`, f.organizationToken, {
      data: { type: 'workspaces', attributes: { name: 'json-pipeline', 'execution-mode': 'local' } },
    });
    expect(created.status).toBe(201);
    localWorkspaceId = created.body.data.id as string;
  });
  afterAll(async () => {
    await h?.close();
  });

  /**
   * A real request with the body's bytes as given (supertest would serialize a Buffer as JSON). Under
   * the default rate limit it waits out a 429's Retry-After and sends again, as a real client does.
   */
  async function send(method: 'post' | 'put', path: string, body: Buffer | string, type = JSON_API) {
    for (let attempt = 1; ; attempt += 1) {
      const res = await fetch(`${h.baseUrl}/api/v2${path}`, {
        method: method.toUpperCase(),
        headers: { Authorization: `Bearer ${f.organizationToken}`, 'Content-Type': type },
        body,
      });
      const text = await res.text();
      if (res.status === 429 && attempt < 20) {
        await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get('retry-after') ?? '1') * 1000));
        continue;
      }
      return { status: res.status, body: (text ? JSON.parse(text) : {}) as { errors?: unknown[] } };
    }
  }

  const firstError = (res: { status: number; body: { errors?: unknown[] } }) => {
    expect(res.status).toBeLessThan(500);
    return res.body.errors?.[0] as {
      status: string;
      title: string;
      detail: string;
      source?: { pointer: string };
      meta?: Record<string, unknown>;
    };
  };

  /** A run body whose plan JSON carries `literal` (written into the text: JSON.stringify could not) at resource_changes/1/change/after/size. */
  const runWithPlanNumber = (literal: string): string => {
    const plan = JSON.parse(JSON.stringify(CHANGING_PLAN)) as { resource_changes: { change: { after: Record<string, unknown> } }[] };
    (plan.resource_changes[1] as { change: { after: Record<string, unknown> } }).change.after = { size: '@@NUMBER@@' };
    const body = {
      data: {
        type: 'runs',
        attributes: { 'plan-json': plan },
        relationships: { workspace: { data: { type: 'workspaces', id: f.workspaceId } } },
      },
    };
    return JSON.stringify(body).replace('"@@NUMBER@@"', literal);
  };

  it.each([
    ['1e1000000', /64-bit/],
    ['-1e309', /64-bit/],
    ['a 200,000-digit integer', /64-bit/, '7'.repeat(200_000)],
    ['1e-20000', /digits after the decimal point/],
  ])('POST /runs with %s in plan-json → 422 pointing at it, and no run', async (_name, reason, literal = _name) => {
    const before = await api(h, 'get', `/workspaces/${f.workspaceId}/runs`, f.organizationToken);
    const res = await send('post', '/runs', runWithPlanNumber(literal));
    expect(res.status).toBe(422);
    const error = firstError(res);
    expect(error.source).toEqual({ pointer: '/data/attributes/plan-json/resource_changes/1/change/after/size' });
    expect(error.detail).toMatch(reason);
    const after = await api(h, 'get', `/workspaces/${f.workspaceId}/runs`, f.organizationToken);
    expect(after.body.meta.pagination['total-count']).toBe(before.body.meta.pagination['total-count']);
  });

  it('POST /runs with ordinary numbers in plan-json keeps them as sent', async () => {
    expect((await send('post', '/runs', runWithPlanNumber('1e308'))).status).toBe(201);
  });

  it('invalid UTF-8 in a JSON:API body → 422 naming the byte offset, nothing created', async () => {
    const text = JSON.stringify({ data: { type: 'workspaces', attributes: { name: 'utf8-@' } } });
    const at = Buffer.byteLength(text.slice(0, text.indexOf('@')));
    const cases: [string, number[]][] = [
      ['an overlong "/"', [0xc0, 0xaf]],
      ['a surrogate', [0xed, 0xa0, 0x80]],
      ['a truncated sequence', [0xe2, 0x82]],
      ['a stray continuation byte', [0x80]],
    ];
    for (const [, bad] of cases) {
      const body = Buffer.concat([
        Buffer.from(text.slice(0, text.indexOf('@'))),
        Buffer.from(bad),
        Buffer.from(text.slice(text.indexOf('@') + 1)),
      ]);
      const res = await send('post', `/organizations/${f.organization}/workspaces`, body);
      expect(res.status).toBe(422);
      const error = firstError(res);
      expect(error.detail).toContain(`byte ${at}`);
      expect(error.meta).toEqual({ 'byte-offset': at });
      expect(error.source).toEqual({ pointer: '' });
    }
    const listed = await api(h, 'get', `/organizations/${f.organization}/workspaces?search[name]=utf8-`, f.organizationToken);
    expect(listed.body.data).toEqual([]);
  });

  it('a byte order mark before a JSON:API body is skipped (RFC 8259 §8.1)', async () => {
    const body = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from(JSON.stringify({ data: { type: 'workspaces', attributes: { name: 'with-bom' } } })),
    ]);
    expect((await send('post', `/organizations/${f.organization}/workspaces`, body)).status).toBe(201);
  });

  describe('plan JSON reports', () => {
    async function planningRun(): Promise<string> {
      const runId = await createRun(h, f.organizationToken, localWorkspaceId);
      await (
        await nativePool(h.orm.em)
      ).query(
        `update runs set status = 'planning', status_timestamps = status_timestamps || jsonb_build_object('planning-at', ${DB_NOW_ISO}),
                version = version + 1 where id = $1`,
        [runId],
      );
      return runId;
    }
    const planText = (literal: string): string =>
      JSON.stringify({ ...CHANGING_PLAN, variables: { count: { value: '@@NUMBER@@' } } }).replace('"@@NUMBER@@"', literal);

    it.each(['1e1000000', '1e-20000', '0e2000000000'])(
      '%s in the plan → 422 with a pointer; the run still takes a good plan',
      async (literal) => {
        const runId = await planningRun();
        const res = await send('put', `/runs/${runId}/plan/json-output`, planText(literal), 'application/json');
        expect(res.status).toBe(422);
        const error = firstError(res);
        expect(error).toMatchObject({ title: 'invalid plan', source: { pointer: '/variables/count/value' } });
        expect((await send('put', `/runs/${runId}/plan/json-output`, planText('1e300'), 'application/json')).status).toBe(200);
      },
    );

    it('invalid UTF-8 in the plan → 422 naming the byte', async () => {
      const runId = await planningRun();
      const text = planText('1');
      const at = text.indexOf('1.9.5');
      const body = Buffer.from(text);
      body[at] = 0xff;
      const res = await send('put', `/runs/${runId}/plan/json-output`, body, 'application/json');
      expect(res.status).toBe(422);
      expect(firstError(res)).toMatchObject({ title: 'invalid plan', meta: { 'byte-offset': at } });
    });
  });
});
