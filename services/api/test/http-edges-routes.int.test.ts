import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Harness } from '../../../test/support/harness.ts';
import { api, JSON_API } from '../../../test/support/fixtures.ts';
import { ORG, expectErrorDocument, raw, startEdges } from './http-edges.fixtures.ts';

/** HTTP edges: error documents for unknown routes and methods, and `include`. */

describe('HTTP edges: routes, methods, includes', () => {
  let h: Harness;
  let token: string;
  let runIds: string[];

  beforeAll(async () => {
    ({ h, token, runIds } = await startEdges());
  });

  afterAll(async () => {
    await h?.close();
  });

  describe('routes, methods and errors', () => {
    it.each([
      ['get', '/api/v2/no-such-route'],
      ['post', '/api/v2/no-such-route'],
      ['get', '/no-such-route'],
      ['get', '/api/v2/organizations/edges/no-such-thing'],
    ] as const)('unknown route %s %s → 404 JSON:API', async (method, path) => {
      const res = await h.http[method](path).set('Authorization', `Bearer ${token}`);
      expect(expectErrorDocument(res, 404)).toEqual({ status: '404', title: 'not found' });
    });

    it.each([
      ['put', '/api/v2/ping'],
      ['delete', '/api/v2/organizations'],
      ['put', `/api/v2/organizations/${ORG}`],
      ['post', `/api/v2/organizations/${ORG}/entitlement-set`],
    ] as const)('wrong method %s %s → 405 JSON:API', async (method, path) => {
      const res = await h.http[method](path).set('Authorization', `Bearer ${token}`);
      const error = expectErrorDocument(res, 405);
      expect(error.title).toBe('method not allowed');
    });

    it.each([
      ['/api/v2/ping', 204],
      ['/API/V2/Ping', 204],
      ['/api/v2/ping/', 204],
      [`/api/v2/Organizations/${ORG}`, 200],
      ['/api/v2/pi%6Eg', 404],
      ['/api/v2', 404],
      ['/api/v2/', 404],
      ['/api/v2//ping', 404],
      ['/api/v3/ping', 404],
      ['/api/v2ping', 404],
      ['/api/v2/ping/extra', 404],
    ] as const)('GET %s → %i, the paths the routes match read as one router reads them', async (path, status) => {
      const res = await raw(h, 'GET', path, { Authorization: `Bearer ${token}` }, []);
      expect(res.status).toBe(status);
      if (status !== 204) expect(res.headers['content-type']).toContain(JSON_API);
    });

    it('GET /ping → 204 with what go-tfe reads: API version, a TFE release at or above v202404-1, not "HCP Terraform", no limit it is not held to', async () => {
      const res = await raw(h, 'GET', '/api/v2/ping', {}, []);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect({
        'tfp-api-version': res.headers['tfp-api-version'],
        'x-tfe-version': res.headers['x-tfe-version'],
        'tfp-appname': res.headers['tfp-appname'],
        'x-ratelimit-limit': res.headers['x-ratelimit-limit'],
      }).toEqual({
        'tfp-api-version': '2.6',
        'x-tfe-version': 'v202507-1',
        'tfp-appname': 'Run Tasks Service',
        // This harness's API has no rate limiter (no operations), so no limit is advertised; ping.int.test.ts
        // runs one at several limits.
        'x-ratelimit-limit': undefined,
      });
    });

    it.each(['/API/V2/ping', '/api/v2/Organizations'])('a wrong method on %s, in any case → 405', async (path) => {
      expectErrorDocument(await h.http.put(path).set('Authorization', `Bearer ${token}`), 405);
    });

    it('an unknown method on a known path → 405, not 501 or 500', async () => {
      const res = await raw(h, 'PROPFIND', '/api/v2/ping', {}, []);
      expect(res.status).toBe(405);
      expect(res.headers['content-type']).toContain(JSON_API);
      expect(JSON.parse(res.text)).toMatchObject({ errors: [{ status: '405' }] });
    });

    it('echoes a well-formed X-Request-Id and replaces a malformed one', async () => {
      const echoed = await api(h, 'get', '/no-such-route').set('X-Request-Id', 'edge-req.42_A');
      expectErrorDocument(echoed, 404);
      expect(echoed.headers['x-request-id']).toBe('edge-req.42_A');
      const replaced = await api(h, 'get', '/no-such-route').set('X-Request-Id', 'bad id <script>');
      expectErrorDocument(replaced, 404);
      expect(replaced.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    });

    it('401s follow the same error rules', async () => {
      expect(expectErrorDocument(await api(h, 'get', '/organizations'), 401)).toEqual({ status: '401', title: 'unauthorized' });
    });
  });

  describe('include on GET /runs/:run_id', () => {
    it("an unknown include → 400 with HCP's title and detail (which go-tfe and the Terraform CLI match), the specifics in meta", async () => {
      for (const [include, value] of [
        ['nope', 'nope'],
        ['task-stages,nope', 'nope'],
        ['cost_estimate', 'cost_estimate'],
      ]) {
        const error = expectErrorDocument(await api(h, 'get', `/runs/${runIds[0]}?include=${include}`, token), 400);
        expect(error).toEqual({
          status: '400',
          title: 'bad request',
          detail: 'Invalid include parameter',
          source: { parameter: 'include' },
          meta: {
            reason: `'${value}' is not a valid include here; allowed: task_stages, plan, apply, workspace, created_by, configuration_version.`,
            value,
            allowed: ['task_stages', 'plan', 'apply', 'workspace', 'created_by', 'configuration_version'],
          },
        });
      }
      expect(expectErrorDocument(await api(h, 'get', `/runs/${runIds[0]}?include=task_stages&include=task_stages`, token), 400)).toEqual({
        status: '400',
        title: 'bad request',
        detail: 'Invalid include parameter',
        source: { parameter: 'include' },
        meta: {
          reason: 'include must be given at most once.',
          value: ['task_stages', 'task_stages'],
          allowed: ['task_stages', 'plan', 'apply', 'workspace', 'created_by', 'configuration_version'],
        },
      });
    });

    it.each(['task-stages', 'task_stages'])('include=%s is accepted and includes exactly the related task stages', async (include) => {
      const res = await api(h, 'get', `/runs/${runIds[0]}?include=${include}`, token);
      expect(res.status).toBe(200);
      expect(res.body.data.id).toBe(runIds[0]);
      const related = (res.body.data.relationships['task-stages'].data as { id: string }[]).map((stage) => stage.id).sort();
      const included = (res.body.included ?? []) as { id: string; type: string }[];
      expect(included.every((resource) => resource.type === 'task-stages')).toBe(true);
      expect(included.map((resource) => resource.id).sort()).toEqual(related);
    });
  });
});
