import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { api, createOrganization } from '../../../test/support/fixtures.ts';

describe('token expiry', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
    await createOrganization(h, 'expiry');
  });
  afterAll(async () => {
    await h.close();
  });

  const tokenDocument = (expiredAt: string) => ({ data: { type: 'authentication-tokens', attributes: { 'expired-at': expiredAt } } });

  it('refuses an expiry in the past with a pointer, and issues nothing', async () => {
    const res = await api(h, 'post', '/organizations/expiry/authentication-token', h.adminToken, tokenDocument('2001-01-01T00:00:00Z'));
    expect(res.status).toBe(422);
    expect(res.body.errors[0].source).toEqual({ pointer: '/data/attributes/expired-at' });
    expect((await api(h, 'get', '/organizations/expiry/authentication-token', h.adminToken)).status).toBe(404);
  });

  it('accepts a future expiry, and the token stops working once it has passed', async () => {
    const future = new Date(Date.now() + 3_600_000).toISOString();
    const res = await api(h, 'post', '/organizations/expiry/authentication-token', h.adminToken, tokenDocument(future));
    expect(res.status).toBe(201);
    expect(res.body.data.attributes['expired-at']).toBe(future);
    const token = res.body.data.attributes.token as string;
    expect((await api(h, 'get', '/organizations/expiry', token)).status).toBe(200);
    await h.orm.em.fork().execute(`update api_tokens set expires_at = now() - interval '1 second' where id = ?`, [res.body.data.id]);
    const expired = await api(h, 'get', '/organizations/expiry', token);
    expect(expired.status).toBe(401);
    expect(expired.body).toEqual({ errors: [{ status: '401', title: 'unauthorized' }] });
  });
});
