import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../../../test/support/browser.ts';
import { api, createRun, createWorkspace, seedOrganization, uniqueName, type Fixture } from '../../../test/support/fixtures.ts';
import type { Harness } from '../../../test/support/harness.ts';
import { startSsoHarness, startTestProvider, type TestProvider } from '../../../test/support/oidc-provider.ts';
import { expectAccessible } from './run-pages/accessibility.ts';

/**
 * Single sign-on in Chromium (playwright-core, Debian's /usr/bin/chromium): a person opens a run's
 * link, chooses "Sign in with SSO", signs in at a real OpenID Connect provider's login form
 * (oidc-provider on loopback), and lands on the run, named in the page's header. The API has the
 * default rate limit on (`ops: true`).
 */
describe('run pages in Chromium: single sign-on', () => {
  let h: Harness;
  let provider: TestProvider;
  let browser: Browser;
  let acme: Fixture;
  let runPath: string;

  beforeAll(async () => {
    provider = await startTestProvider();
    h = await startSsoHarness(provider);
    acme = await seedOrganization(h, uniqueName('sso-browser'));
    const patched = await api(h, 'patch', `/organizations/${acme.organization}`, acme.organizationToken, {
      data: { type: 'organizations', attributes: { 'sso-team-mapping': { 'idp-admins': 'owners' } } },
    });
    expect(patched.status).toBe(200);
    const workspace = uniqueName('network');
    const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, workspace);
    const runId = await createRun(h, acme.organizationToken, workspaceId, { message: 'Rotate the certificates' });
    runPath = `/app/${acme.organization}/workspaces/${workspace}/runs/${runId}`;
    provider.setPerson('dana', { email: 'dana@example.test', preferredUsername: 'dana-ops', name: 'Dana', groups: ['idp-admins'] });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
    await provider?.close();
  }, 30_000);

  it("signs in through the provider's login form and shows the person's name on the run page", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${h.baseUrl}${runPath}`);
    await expect(page.getByRole('heading', { name: 'Sign in' }).isVisible()).resolves.toBe(true);
    await expectAccessible(page, 'the sign-in page with single sign-on');
    await page.getByRole('link', { name: 'Sign in with SSO' }).click();
    // The provider's own login form (oidc-provider's development interactions).
    await page.waitForURL((url) => url.href.startsWith(provider.issuer));
    await page.locator('input[name="login"]').fill('dana');
    await page.locator('input[name="password"]').fill('any password');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.waitForURL(`${h.baseUrl}${runPath}`);
    await expect(page.locator('header.site .who').innerText()).resolves.toContain('Signed in as dana-ops');
    await expect(page.getByText('Rotate the certificates').first().isVisible()).resolves.toBe(true);
    await page.screenshot({ path: 'test-results/run-page-sso.png' });
    await context.close();
  });
});
