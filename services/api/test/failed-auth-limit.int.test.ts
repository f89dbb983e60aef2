import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { API_TOKEN_PREFIX, CALLBACK_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import { eventually } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Failed authentications are counted by client address; past AUTH_FAILURES_PER_MINUTE the address is
 * answered 429 with Retry-After, while a client with a token this process knows goes on. Whether
 * X-Forwarded-For names the client is TRUST_PROXY's to say: by default a client cannot pick its own
 * address with it; behind a proxy, the address the proxy appended (the last) is the client's.
 */

const LIMIT = 5;

function suite(trustProxy: boolean): () => void {
  return () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness({ ops: true, env: { AUTH_FAILURES_PER_MINUTE: String(LIMIT), TRUST_PROXY: String(trustProxy) } });
      // The site-admin token known to this process before any address is refused: its principal is
      // remembered once the cache trusts its connection.
      await eventually(async () => (h.ops?.ops.principalCache?.trusted ? true : undefined), 10_000, 20);
      expect((await organizations(h.adminToken)).status).toBe(200);
    });
    afterAll(async () => {
      await h?.close();
    });

    const organizations = (token: string, forwardedFor?: string) => {
      const req = h.http.get('/api/v2/organizations').set('Authorization', `Bearer ${token}`);
      return forwardedFor ? req.set('X-Forwarded-For', forwardedFor) : req;
    };
    /** Spends an address's failures; every one is the ordinary 401. */
    const spend = async (forwardedFor: string): Promise<void> => {
      for (let index = 0; index < LIMIT; index += 1)
        expect((await organizations(generateToken(API_TOKEN_PREFIX), forwardedFor)).status).toBe(401);
    };

    it('answers 429 with Retry-After once the failures are spent, on the API and the callback route alike', async () => {
      await spend('203.0.113.1');
      const refused = await organizations(generateToken(API_TOKEN_PREFIX), '203.0.113.1');
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toMatch(/^\d+$/);
      expect(refused.body.errors).toEqual([expect.objectContaining({ status: '429', title: 'too many requests' })]);
      const callback = await h.http
        .patch('/api/v2/task-results/taskrs-0123456789abcdef/callback')
        .set('Authorization', `Bearer ${generateToken(CALLBACK_TOKEN_PREFIX)}`)
        .set('X-Forwarded-For', '203.0.113.1')
        .set('Content-Type', 'application/vnd.api+json')
        .send('{}');
      expect(callback.status).toBe(429);
    });

    if (!trustProxy) {
      it('believes no X-Forwarded-For: another header from the same client is the same address', async () => {
        expect((await organizations(generateToken(API_TOKEN_PREFIX), '198.51.100.99')).status).toBe(429);
        expect((await organizations(generateToken(API_TOKEN_PREFIX))).status).toBe(429);
      });
    } else {
      it("counts the proxy's address for the client (the last entry), whatever the client put before it", async () => {
        await spend('192.0.2.50, 198.51.100.1');
        // The same client claiming another address before the proxy's entry: still refused.
        expect((await organizations(generateToken(API_TOKEN_PREFIX), '192.0.2.51, 198.51.100.1')).status).toBe(429);
        // Another client behind the proxy: its own budget.
        expect((await organizations(generateToken(API_TOKEN_PREFIX), '198.51.100.2')).status).toBe(401);
      });
    }

    it('a known token keeps working from an address past its limit', async () => {
      if (trustProxy) await spend('203.0.113.9');
      // Refused for any token it does not know, from memory or the database.
      expect((await organizations(generateToken(API_TOKEN_PREFIX), '203.0.113.9')).status).toBe(429);
      expect((await organizations(h.adminToken, '203.0.113.9')).status).toBe(200);
    });
  };
}

describe('failed authentications by address (TRUST_PROXY=false, the default)', suite(false));
describe('failed authentications by address (TRUST_PROXY=true)', suite(true));
