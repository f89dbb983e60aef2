import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * GET /ping's X-RateLimit-Limit follows RATE_LIMIT_PER_SECOND, with the limiter as main.ts builds it
 * (`ops`): go-tfe throttles itself from that number, so it must be the budget we enforce, and absent
 * when we enforce none (go-tfe then does not throttle at all). The other headers: http-edges.int.test.ts.
 */
describe.each([
  ['7', '7'],
  ['100', '100'],
  ['0', undefined],
] as const)('GET /ping with RATE_LIMIT_PER_SECOND=%s', (perSecond, expected) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ ops: true, env: { RATE_LIMIT_PER_SECOND: perSecond } });
  });
  afterAll(async () => {
    await h.close();
  });

  it(`→ 204, X-RateLimit-Limit ${expected ?? 'absent'}, and the version headers`, async () => {
    const res = await h.http.get('/api/v2/ping');
    expect(res.status).toBe(204);
    expect(res.headers['x-ratelimit-limit']).toBe(expected);
    expect(res.headers['x-tfe-version']).toBe('v202507-1');
    expect(res.headers['tfp-appname']).toBe('Run Tasks Service');
    expect(res.headers['tfp-api-version']).toBe('2.6');
  });

  it('an authenticated route answers with the same limit, so /ping tells go-tfe the budget it is held to', async () => {
    const res = await h.http.get('/api/v2/organizations').set('Authorization', `Bearer ${h.adminToken}`);
    expect(res.status).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBe(expected);
  });
});
