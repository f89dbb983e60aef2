import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createRun, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../test/support/harness.ts';
import { cookieOf, csrfIn, FORM } from './run-pages/http-forms.ts';

/**
 * The run pages as a user's service runs them: operations on (rate limiting at its default of 30
 * requests a second), not the switches that make the other page suites easy to set up.
 */
describe('run pages with the default settings', () => {
  let h: Harness;
  let f: Fixture;
  let runPath: string;

  beforeAll(async () => {
    h = await startHarness({ ops: true });
    f = await seedOrganization(h, 'pages-defaults');
    const runId = await createRun(h, f.organizationToken, f.workspaceId, { message: 'opened from a link' });
    runPath = `/app/${f.organization}/workspaces/${f.organization}-ws/runs/${runId}`;
  }, 60_000);

  afterAll(async () => {
    await h?.close();
  });

  it('runs with the rate limiter on', () => {
    expect(h.config.rateLimitPerSecond).toBeGreaterThan(0);
    expect(h.ops?.ops.rateLimiter).toBeDefined();
  });

  it("signs in from a run's link and lands on the run", async () => {
    const opened = await fetch(`${h.baseUrl}${runPath}`, { redirect: 'manual' });
    expect(opened.status).toBe(303);
    const formUrl = `${h.baseUrl}${opened.headers.get('location') ?? ''}`;
    expect(formUrl).toContain(`next=${runPath}`);

    const form = await fetch(formUrl, { redirect: 'manual' });
    expect(form.status).toBe(200);
    const page = await form.text();
    const next = /name="next" value="([^"]+)"/.exec(page)?.[1] ?? '';
    const signedIn = await fetch(`${h.baseUrl}/session`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': FORM, cookie: cookieOf(form, 'runtasks_sign_in') ?? '' },
      body: new URLSearchParams({ csrf: csrfIn(page), token: f.organizationToken, next }).toString(),
    });
    expect(signedIn.status).toBe(303);
    expect(signedIn.headers.get('location')).toBe(runPath);
    expect(signedIn.headers.get('x-ratelimit-limit')).toBe(String(h.config.rateLimitPerSecond));

    const run = await fetch(`${h.baseUrl}${runPath}`, { headers: { cookie: cookieOf(signedIn, 'runtasks_session') ?? '' } });
    expect(run.status).toBe(200);
    expect(await run.text()).toContain('opened from a link');
  });

  it('takes a CSP report', async () => {
    const report = await fetch(`${h.baseUrl}/csp-report`, {
      method: 'POST',
      headers: { 'content-type': 'application/csp-report' },
      body: JSON.stringify({ 'csp-report': { 'document-uri': `${h.baseUrl}${runPath}`, 'violated-directive': 'img-src' } }),
    });
    expect(report.status).toBe(204);
  });
});
