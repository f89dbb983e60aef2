import { describe, expect, it } from '@jest/globals';
import { mkdirSync } from 'node:fs';
import { createRun } from '../../../test/support/fixtures.ts';
import { callBackWith, CSP_LOG, DOM_CENSUS, type DomCensus, HOSTILE_OUTCOME, PWNED, ROOT } from './run-pages/browser-content.ts';
import { useRunPagesBrowser } from './run-pages/browser-setup.ts';

/**
 * The run pages in a real browser (Debian's Chromium through playwright-core): sign in with a token,
 * follow the links a task server is sent, watch a run's stages pass, fail and wait for an override
 * without reloading, override from the page, sign out; a foreign run's page is a missing one's; what
 * task servers send renders inert, and the pages' Content-Security-Policy is never violated.
 */
describe('the run pages in a browser', () => {
  const g = useRunPagesBrowser();
  const { lines, deliveryOf, newContext, violations, signIn, stageHeading } = g;

  it('signs in from a payload link, shows the run live as it moves, takes an override, and renders what servers send inert', async () => {
    const context = await newContext();
    const page = await context.newPage();
    try {
      const lint = await deliveryOf('pre_plan', 'mandatory');
      const runUrl = new URL(lint.run_app_url);
      expect(runUrl.pathname).toBe(`/app/pages/workspaces/network/runs/${g.runId}`);

      // The link a task server is sent asks for a sign-in first, then opens the run itself.
      await page.goto(runUrl.href, { waitUntil: 'domcontentloaded' });
      expect(new URL(page.url()).pathname).toBe('/session');
      await signIn(page, g.owner.organizationToken);
      expect(page.url()).toBe(runUrl.href);
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toContain(g.runId);
      await stageHeading(page, 'pre plan').waitFor();
      expect(await stageHeading(page, 'pre plan').textContent()).toMatch(/running/);
      // A mark on the window: it survives the updates below only if the page is never reloaded.
      await page.evaluate('window.__sameDocument = true');

      expect(await callBackWith(lint, { status: 'passed', message: 'No lint findings' })).toBe(200);
      await page.getByRole('heading', { level: 3, name: /pre plan passed/i }).waitFor({ timeout: 15_000 });

      // A keyboard user opens lint's delivery attempts: the updates below keep them open and keep the focus there.
      const lintAttempts = page.locator(`#attempts-${lint.task_result_id} > summary`);
      await lintAttempts.focus();
      await page.keyboard.press('Enter');

      const scanner = await deliveryOf('post_plan', 'mandatory');
      const costs = await deliveryOf('post_plan', 'advisory');
      expect(
        await callBackWith(scanner, { status: 'failed', message: `<script>${PWNED}</script>1 critical finding` }, [HOSTILE_OUTCOME]),
      ).toBe(200);
      expect(
        await callBackWith(costs, {
          status: 'failed',
          message: `<img src=x onerror="${PWNED}">Over budget`,
          url: 'https://costs.example.com/r/1',
        }),
      ).toBe(200);
      await page.getByRole('heading', { level: 3, name: /post plan awaiting override/i }).waitFor({ timeout: 15_000 });
      expect(await page.evaluate('window.__sameDocument')).toBe(true);
      expect(await page.locator(`#attempts-${lint.task_result_id}`).getAttribute('open')).toBe('');
      expect(await page.evaluate('document.activeElement.parentElement.id')).toBe(`attempts-${lint.task_result_id}`);

      // Each stage, result and outcome, as the API has them.
      const results = page.locator('article.result');
      expect(await results.locator('h4').allTextContents()).toEqual([
        expect.stringMatching(/lint\s+passed/),
        expect.stringMatching(/scanner\s+failed/),
        expect.stringMatching(/costs\s+failed/),
      ]);
      const scannerCard = results.nth(1);
      expect(await scannerCard.locator('.message').textContent()).toBe(`<script>${PWNED}</script>1 critical finding`);
      expect(await scannerCard.getByText('mandatory').count()).toBe(1);
      expect(await results.nth(2).getByText('advisory').count()).toBe(1);
      expect(await results.nth(2).getByRole('link', { name: "The task's details" }).getAttribute('href')).toBe(
        'https://costs.example.com/r/1',
      );
      const outcome = scannerCard.locator('table.outcomes tbody tr').first();
      expect(await outcome.locator('th').textContent()).toBe('CVE-2026-0001<script>');
      expect(await outcome.locator('td').first().textContent()).toContain(`<img src=x onerror="${PWNED}">Outdated TLS library`);
      // jsonb keeps keys in its own order: the tags are compared as a set.
      expect((await outcome.locator('.badge.level-error').allTextContents()).sort()).toEqual([
        `Severity: <img src=x onerror="${PWNED}">High`,
        'Status: Failed',
      ]);
      expect(await outcome.locator('.badge.level-info').allTextContents()).toEqual([`<b onmouseover="${PWNED}">Kind</b>: info`]);
      await scannerCard.getByText('Details of CVE-2026-0001<script>').click();
      const markdown = scannerCard.locator('.markdown');
      expect(await markdown.locator('h2').textContent()).toBe('Finding');
      expect(await markdown.locator('strong').textContent()).toBe('openssl');
      expect(await markdown.locator('table td').allTextContents()).toEqual(['openssl', '1.0.2']);
      expect(await markdown.textContent()).toContain(`<script>${PWNED}</script>`);
      await scannerCard.getByText(/Delivery attempts \(1\)/).click();
      expect(await scannerCard.locator('.attempts tbody tr').count()).toBe(1);

      // Inert: nothing from a task server became an element that runs or loads anything.
      const dom = await page.evaluate<DomCensus>(DOM_CENSUS);
      expect(dom.pwned).toBeUndefined();
      expect(dom.scripts).toEqual([expect.stringMatching(/^\/assets\/pages-[0-9a-f]{12}\.js$/)]);
      expect([dom.inlineScripts, dom.images, dom.frames, dom.handlers]).toEqual([0, 0, 0, []]);
      for (const link of dom.links) {
        if (link.href?.startsWith('/') || link.href?.startsWith('#')) continue;
        expect(link).toEqual({ href: expect.stringMatching(/^https:\/\//), rel: 'noopener noreferrer' });
      }
      expect(dom.links.map((link) => link.href)).toEqual(
        expect.arrayContaining(['https://example.com/advisory', 'https://costs.example.com/r/1']),
      );

      mkdirSync(`${ROOT}test-results`, { recursive: true });
      await page.screenshot({ path: `${ROOT}test-results/run-page.png`, fullPage: true });

      // Override from the page with a comment: the run goes on (auto-apply) to applied, and the page follows.
      await page.getByLabel('Comment (optional)').first().fill('Accepted: the upgrade is scheduled');
      await page.getByRole('button', { name: 'Override and continue' }).click();
      await page.waitForLoadState('domcontentloaded');
      expect(page.url()).toBe(runUrl.href);
      await page.locator('#run-live[data-final="true"]').waitFor({ timeout: 20_000 });
      expect(await page.locator('.status-line').textContent()).toMatch(/applied/);
      expect(await stageHeading(page, 'post plan').textContent()).toMatch(/passed/);
      expect(await page.getByRole('button', { name: 'Override and continue' }).count()).toBe(0);

      expect(await violations(page)).toEqual([]);
    } finally {
      await context.close();
    }
    expect(lines.filter((line) => line.includes(CSP_LOG))).toEqual([]);
  }, 90_000);

  it('opens the workspace link of the payload, shows a foreign run exactly as a missing one, and signs out', async () => {
    const context = await newContext('dark');
    const page = await context.newPage();
    try {
      const workspaceUrl = (await deliveryOf('pre_plan', 'mandatory')).workspace_app_url;
      await page.goto(workspaceUrl, { waitUntil: 'domcontentloaded' });
      await signIn(page, g.owner.organizationToken);
      expect(page.url()).toBe(workspaceUrl);
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('network');
      expect(await page.getByRole('link', { name: g.runId }).getAttribute('href')).toBe(`/app/pages/workspaces/network/runs/${g.runId}`);
      expect(await page.getByRole('row', { name: /scanner/ }).textContent()).toMatch(/post plan\s*mandatory/);
      await page.screenshot({ path: `${ROOT}test-results/workspace-page.png`, fullPage: true });

      await page.goto(`${g.h.baseUrl}/app/pages/workspaces/network/runs/${g.runId}`, { waitUntil: 'domcontentloaded' });
      await page.screenshot({ path: `${ROOT}test-results/run-page-dark.png`, fullPage: true });
      // Usable with the keyboard: the first Tab reaches the skip link, which moves focus to the content,
      // and the delivery attempts open with Enter.
      await page.keyboard.press('Tab');
      expect(await page.evaluate('document.activeElement.textContent')).toBe('Skip to content');
      await page.keyboard.press('Enter');
      expect(await page.evaluate('document.activeElement.id')).toBe('main');
      const attempts = page.locator('details.attempts summary').first();
      await attempts.focus();
      await page.keyboard.press('Enter');
      expect(await page.locator('details.attempts').first().getAttribute('open')).toBe('');
      // On a phone's width nothing runs off the side of the page.
      await page.setViewportSize({ width: 360, height: 740 });
      expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
      await page.screenshot({ path: `${ROOT}test-results/run-page-narrow.png`, fullPage: true });

      const foreign = await page.goto(`${g.h.baseUrl}${g.foreignRunPath}`);
      const foreignPage = [foreign?.status(), await foreign?.text()];
      const missing = await page.goto(`${g.h.baseUrl}${g.foreignRunPath.replace(/runs\/.*$/, 'runs/run-0000000000000000')}`);
      expect(foreignPage[0]).toBe(404);
      expect(foreignPage).toEqual([missing?.status(), await missing?.text()]);
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Not found');

      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.waitForLoadState('domcontentloaded');
      expect(new URL(page.url()).pathname).toBe('/session');
      await page.goto(workspaceUrl, { waitUntil: 'domcontentloaded' });
      expect(new URL(page.url()).pathname).toBe('/session');
      await page.screenshot({ path: `${ROOT}test-results/sign-in-page.png` });
      expect(await violations(page)).toEqual([]);
    } finally {
      await context.close();
    }
    const [{ count }] = await g.h.orm.em.fork().execute<{ count: string }[]>(`select count(*) from page_sessions`);
    // The first test's session stays (it never signed out); this one's is gone from the server.
    expect(Number(count)).toBe(1);
  }, 60_000);

  it("takes the README's picture of a run whose scanner found something", async () => {
    const run = await createRun(g.h, g.owner.organizationToken, g.owner.workspaceId, {
      message: 'Add a NAT gateway to the private subnets',
    });
    expect(
      await callBackWith(await deliveryOf('pre_plan', 'mandatory', run), { status: 'passed', message: 'Formatting and naming rules met' }),
    ).toBe(200);
    const finding = (id: string, description: string, severity: [string, string], body: string) => ({
      type: 'task-result-outcomes',
      attributes: {
        'outcome-id': id,
        description,
        body,
        url: `https://scanner.example.com/rules/${id}`,
        tags: { Status: [{ label: 'Failed', level: 'error' }], Severity: [{ label: severity[0], level: severity[1] }] },
      },
    });
    const scanner = await deliveryOf('post_plan', 'mandatory', run);
    const outcomes = [
      finding(
        'AWS-0104',
        'Security group allows egress to 0.0.0.0/0',
        ['High', 'error'],
        '`aws_security_group.nat` allows all outbound traffic.\n\nRestrict `egress` to the CIDR blocks the subnets need. See [the rule](https://scanner.example.com/rules/AWS-0104).',
      ),
      finding(
        'AWS-0178',
        'VPC flow logs are not enabled',
        ['Medium', 'warning'],
        'Enable flow logs on `aws_vpc.main` to keep a record of traffic.',
      ),
    ];
    expect(
      await callBackWith(
        scanner,
        { status: 'failed', message: '2 findings: 1 high, 1 medium', url: 'https://scanner.example.com/scans/81' },
        outcomes,
      ),
    ).toBe(200);
    expect(
      await callBackWith(await deliveryOf('post_plan', 'advisory', run), { status: 'passed', message: 'Estimated +$32.85/month' }),
    ).toBe(200);

    const context = await newContext();
    const page = await context.newPage();
    try {
      await page.goto(`${g.h.baseUrl}/app/pages/workspaces/network/runs/${run}`, { waitUntil: 'domcontentloaded' });
      await signIn(page, g.owner.organizationToken);
      await page.getByRole('heading', { level: 3, name: /post plan awaiting override/i }).waitFor({ timeout: 15_000 });
      expect(await page.locator('table.outcomes tbody th').allTextContents()).toEqual(['AWS-0104', 'AWS-0178']);
      await page.getByText('Details of AWS-0104').click();
      await page.screenshot({ path: `${ROOT}test-results/run-page-readme.png`, fullPage: true });
      expect(await violations(page)).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);
});
