import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser, type Page } from 'playwright-core';
import { launchChromium } from '../../../test/support/browser.ts';
import { seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * The API reference page in a real browser (Debian's Chromium through playwright-core): Swagger UI
 * renders every operation under the page's own CSP, and try-it-out calls the API with a bearer token.
 */

interface Watched {
  violations: string[];
  errors: string[];
  offOrigin: string[];
}

/** Records CSP violations (the page's own event and the console's report), page errors and requests leaving the origin. */
async function watch(page: Page, origin: string): Promise<Watched> {
  const watched: Watched = { violations: [], errors: [], offOrigin: [] };
  await page.exposeFunction('reportViolation', (text: string) => watched.violations.push(text));
  // A string: the test's TypeScript has no DOM types, and this runs in the page.
  await page.addInitScript({
    content: `document.addEventListener('securitypolicyviolation', (e) => window.reportViolation(e.violatedDirective + ' ' + e.blockedURI));`,
  });
  page.on('console', (message) => {
    if (/content security policy/i.test(message.text())) watched.violations.push(message.text());
  });
  page.on('pageerror', (error) => watched.errors.push(error.message));
  page.on('request', (request) => {
    if (!request.url().startsWith(origin) && !request.url().startsWith('data:')) watched.offOrigin.push(request.url());
  });
  return watched;
}

describe('the API reference page in a browser', () => {
  let h: Harness;
  let browser: Browser;
  let org: Fixture;
  let operations: number;

  beforeAll(async () => {
    h = await startHarness({ ops: true, reachableBaseUrl: true });
    org = await seedOrganization(h, 'reference');
    const doc = (await (await fetch(`${h.baseUrl}/openapi.json`)).json()) as { paths: Record<string, object> };
    operations = Object.values(doc.paths).reduce((sum, path) => sum + Object.keys(path).length, 0);
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  }, 30_000);

  it('renders every operation of /openapi.json with no CSP violation and nothing fetched elsewhere', async () => {
    const page = await browser.newPage();
    try {
      const watched = await watch(page, h.baseUrl);
      const response = await page.goto(`${h.baseUrl}/docs`, { waitUntil: 'load', timeout: 15_000 });
      expect(response?.status()).toBe(200);
      // Tags start closed; opened one after another, they show every operation.
      await page.locator('#operations-tag-runs').waitFor({ timeout: 15_000 });
      let shown = 0;
      for (const tag of await page.locator('.opblock-tag').all()) {
        await tag.click();
        const section = tag.locator('xpath=..');
        await section.locator('.opblock').first().waitFor({ timeout: 15_000 });
        shown += await section.locator('.opblock').count();
        await tag.click();
      }
      expect(shown).toBe(operations);
      await page.getByRole('button', { name: 'Authorize' }).first().waitFor({ timeout: 5_000 });
      expect(watched).toEqual({ violations: [], errors: [], offOrigin: [] });
    } finally {
      await page.close();
    }
  }, 60_000);

  it('tries an operation out against the API with the bearer token given in Authorize', async () => {
    const page = await browser.newPage();
    try {
      const watched = await watch(page, h.baseUrl);
      await page.goto(`${h.baseUrl}/docs`, { waitUntil: 'load', timeout: 15_000 });
      await page.locator('.btn.authorize').first().click({ timeout: 15_000 });
      const bearer = page.locator('.auth-container').filter({ hasText: 'bearerAuth' });
      await bearer.locator('input').fill(org.organizationToken);
      await bearer.locator('button.authorize').click();
      await page.locator('.modal-ux button.btn-done').first().click();

      await page.locator('#operations-tag-organizations').click();
      const operation = page.locator('#operations-organizations-getOrganizations');
      await operation.locator('.opblock-summary').first().click();
      await operation.locator('button.try-out__btn').click();
      const sent = page.waitForRequest((request) => new URL(request.url()).pathname === '/api/v2/organizations', { timeout: 15_000 });
      await operation.locator('button.execute').click();
      expect((await sent).headers()['authorization']).toBe(`Bearer ${org.organizationToken}`);
      await operation.locator('.live-responses-table tbody .response-col_status').first().waitFor({ timeout: 15_000 });
      expect((await operation.locator('.live-responses-table tbody .response-col_status').first().innerText()).trim()).toBe('200');
      expect(await operation.locator('.live-responses-table tbody .response-col_description').first().innerText()).toContain(
        org.organization,
      );
      expect(watched).toEqual({ violations: [], errors: [], offOrigin: [] });
    } finally {
      await page.close();
    }
  }, 60_000);
});
