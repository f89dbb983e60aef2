import { describe, expect, it } from '@jest/globals';
import { mkdirSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { api, createRun, createTask, createTeam, createTeamToken, eventually, grantWorkspace } from '../../../../test/support/fixtures.ts';
import { expectAccessible } from './accessibility.ts';
import { callBackWith, CSP_LOG, DOM_CENSUS, type DomCensus, HOSTILE_OUTCOME, PWNED, ROOT } from './browser-content.ts';
import { type RateLimitSetting, useRunPagesBrowser } from './browser-setup.ts';
import { cookieOf, csrfIn } from './http-forms.ts';
import { autoSubmitting, startOtherSite } from './other-sites.ts';

/**
 * The run pages in a real browser (Debian's Chromium through playwright-core): sign in with a token,
 * follow the links a task server is sent, watch a run's stages pass, fail and wait for an override
 * without reloading, override from the page, sign out; a foreign run's page is a missing one's; what
 * task servers send renders inert, and the pages' Content-Security-Policy is never violated.
 */
export function runPagesInBrowser(rateLimit: RateLimitSetting): void {
  describe(`the run pages in a browser (rate limit ${rateLimit})`, () => {
    const g = useRunPagesBrowser(rateLimit);
    const { lines, deliveryOf, newContext, violations, signIn, stageHeading, sessions, workspaceWithTasks } = g;

    it('runs the API as configured: the default rate limit on, or off', () => {
      expect(g.h.config.rateLimitPerSecond).toBe(rateLimit === 'default' ? 30 : 0);
      expect(g.h.ops?.ops.rateLimiter !== undefined).toBe(rateLimit === 'default');
    });

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
        await expectAccessible(page, 'sign-in');
        await signIn(page, g.owner.organizationToken);
        expect(page.url()).toBe(runUrl.href);
        expect(await page.getByRole('heading', { level: 1 }).textContent()).toContain(g.runId);
        await stageHeading(page, 'pre plan').waitFor();
        expect(await stageHeading(page, 'pre plan').textContent()).toMatch(/running/i);
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
          expect.stringMatching(/lint\s+Passed/),
          expect.stringMatching(/scanner\s+Failed/),
          expect.stringMatching(/costs\s+Failed \(advisory\)/),
        ]);
        expect(await page.locator('.stage-summary .summary').allTextContents()).toEqual([
          '1 passed',
          '1 failed (mandatory), 1 failed (advisory)',
        ]);
        expect(await scannerCardSeverity(page)).toEqual(['1 error']);
        const scannerCard = results.nth(1);
        expect(await scannerCard.locator('.message').textContent()).toBe(`<script>${PWNED}</script>1 critical finding`);
        expect(await scannerCard.getByText('mandatory', { exact: true }).count()).toBe(1);
        expect(await results.nth(2).getByText('advisory', { exact: true }).count()).toBe(1);
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
        await expectAccessible(page, 'run page awaiting an override');

        // Override from the page with a comment: the run goes on (auto-apply) to applied, and the page follows.
        await page.getByLabel('Why override? (optional comment)').fill('Accepted: the upgrade is scheduled');
        await page.getByRole('button', { name: 'Override and continue' }).click();
        await page.waitForLoadState('domcontentloaded');
        expect(page.url()).toBe(runUrl.href);
        // The run first (a loaded machine can take long to apply it), then the page, which must follow it
        // within a few of its refreshes (one a second here), whatever the run took.
        const runStatus = async (): Promise<string | undefined> =>
          (await g.h.orm.em.fork().execute<{ status: string }[]>(`select status from runs where id = ?`, [g.runId]))[0]?.status;
        expect(await eventually(async () => ((await runStatus()) === 'applied' ? 'applied' : undefined), 90_000, 100)).toBe('applied');
        await page
          .locator('#run-live[data-final="true"]')
          .waitFor({ timeout: 20_000 })
          .catch(async (error: unknown) => {
            const seen = await page.evaluate(`JSON.stringify({
              sameDocument: window.__sameDocument === true,
              line: document.querySelector('.status-line')?.textContent?.trim(),
              notice: document.getElementById('live-notice')?.hidden ? '' : document.getElementById('live-notice')?.textContent?.trim(),
            })`);
            throw new Error(`${(error as Error).message}\nrun ${g.runId} is ${await runStatus()}; the page: ${String(seen)}`, {
              cause: error,
            });
          });
        expect(await page.locator('.status-line').textContent()).toMatch(/applied/i);
        expect(await stageHeading(page, 'post plan').textContent()).toMatch(/overridden/i);
        expect(await page.getByRole('button', { name: 'Override and continue' }).count()).toBe(0);
        // After a reload too: who overrode it, when, and what they said.
        await page.reload({ waitUntil: 'domcontentloaded' });
        expect(squeeze(await page.locator('.override-note').textContent())).toMatch(
          /^Overridden by owners of pages, (now|\d+ seconds? ago): Accepted: the upgrade is scheduled$/,
        );
        expect(await page.locator('.override-note time').getAttribute('datetime')).toMatch(/^\d{4}-\d\d-\d\dT/);

        expect(await violations(page)).toEqual([]);
      } finally {
        await context.close();
      }
      expect(lines.filter((line) => line.includes(CSP_LOG))).toEqual([]);
    }, 120_000);

    it('opens the workspace link of the payload, shows a foreign run exactly as a missing one, and signs out', async () => {
      const context = await newContext('dark');
      const page = await context.newPage();
      try {
        const workspaceUrl = (await deliveryOf('pre_plan', 'mandatory')).workspace_app_url;
        await page.goto(workspaceUrl, { waitUntil: 'domcontentloaded' });
        await signIn(page, g.owner.organizationToken);
        expect(page.url()).toBe(workspaceUrl);
        expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('network');
        await expectAccessible(page, 'workspace (dark)');
        expect(await page.getByRole('link', { name: g.runId }).getAttribute('href')).toBe(`/app/pages/workspaces/network/runs/${g.runId}`);
        expect(await page.getByRole('row', { name: /scanner/ }).textContent()).toMatch(/post plan\s*mandatory/);
        await page.screenshot({ path: `${ROOT}test-results/workspace-page.png`, fullPage: true });

        await page.goto(`${g.h.baseUrl}/app/pages/workspaces/network/runs/${g.runId}`, { waitUntil: 'domcontentloaded' });
        await page.screenshot({ path: `${ROOT}test-results/run-page-dark.png`, fullPage: true });
        await expectAccessible(page, 'run page (dark)');
        // A long task name wraps; the State column beside it keeps its word on one line.
        await createTask(g.h, g.owner, g.server.url, { name: `policy-${'checks-for-every-module-'.repeat(6)}end` });
        await page.goto(`${g.h.baseUrl}/app/pages`, { waitUntil: 'domcontentloaded' });
        await expectAccessible(page, 'organization (dark)');
        const stateLines = await page.evaluate<number[]>(`[...document.querySelectorAll('td.nowrap')].map((cell) => {
          const range = document.createRange();
          range.selectNodeContents(cell);
          return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;
        })`);
        expect(stateLines.length).toBeGreaterThanOrEqual(4);
        expect(stateLines.every((lines) => lines === 1)).toBe(true);
        await page.goto(`${g.h.baseUrl}/app/pages/workspaces/network/runs/${g.runId}`, { waitUntil: 'domcontentloaded' });
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
        await expectAccessible(page, 'run page (narrow)');

        const foreign = await page.goto(`${g.h.baseUrl}${g.foreignRunPath}`);
        const foreignPage = [foreign?.status(), await foreign?.text()];
        const missing = await page.goto(`${g.h.baseUrl}${g.foreignRunPath.replace(/runs\/.*$/, 'runs/run-0000000000000000')}`);
        expect(foreignPage[0]).toBe(404);
        expect(foreignPage).toEqual([missing?.status(), await missing?.text()]);
        expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Not found');
        await expectAccessible(page, 'not found');

        const before = await sessions();
        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.waitForLoadState('domcontentloaded');
        expect(new URL(page.url()).pathname).toBe('/session');
        await page.goto(workspaceUrl, { waitUntil: 'domcontentloaded' });
        expect(new URL(page.url()).pathname).toBe('/session');
        await page.screenshot({ path: `${ROOT}test-results/sign-in-page.png` });
        expect(await violations(page)).toEqual([]);
        // Its session is gone from the server.
        expect(await sessions()).toBe(before - 1);
      } finally {
        await context.close();
      }
    }, 60_000);

    it("takes the README's picture of a run whose scanner found something", async () => {
      const run = await createRun(g.h, g.owner.organizationToken, await workspaceWithTasks('vpc'), {
        message: 'Add a NAT gateway to the private subnets',
      });
      expect(
        await callBackWith(await deliveryOf('pre_plan', 'mandatory', run), {
          status: 'passed',
          message: 'Formatting and naming rules met',
        }),
      ).toBe(200);
      const finding = (id: string, description: string, severity: [string, string], body: string) => ({
        type: 'task-result-outcomes',
        attributes: {
          'outcome-id': id,
          description,
          body,
          url: `https://scanner.example.com/rules/${id}`,
          tags: { Status: [{ label: 'Failed', level: severity[1] }], Severity: [{ label: severity[0], level: severity[1] }] },
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
        await page.goto(`${g.h.baseUrl}/app/pages/workspaces/vpc/runs/${run}`, { waitUntil: 'domcontentloaded' });
        await signIn(page, g.owner.organizationToken);
        await page.getByRole('heading', { level: 3, name: /post plan awaiting override/i }).waitFor({ timeout: 15_000 });
        expect(await page.locator('table.outcomes tbody th').allTextContents()).toEqual(['AWS-0104', 'AWS-0178']);
        // The picture: the finding overridden with a reason, the run waiting for its confirmation.
        await page.getByLabel('Why override? (optional comment)').fill('Egress is reviewed in SEC-212; flow logs follow next sprint.');
        await page.getByRole('button', { name: 'Override and continue' }).click();
        await page.waitForLoadState('domcontentloaded');
        await eventually(
          async () => ((await page.locator('.status-line').textContent())?.includes('Needs confirmation') ? true : undefined),
          15_000,
        ).catch(async (error: unknown) => {
          throw new Error(`${String(error)}: the page says ${await page.locator('.status-line').textContent()}`);
        });
        expect(squeeze(await page.locator('.override-note').textContent())).toMatch(
          /^Overridden by owners of pages, .+: Egress is reviewed/,
        );
        expect(await scannerCardSeverity(page)).toEqual(['1 error', '1 warning']);
        await page.getByText('Details of AWS-0104').click();
        await page.evaluate('document.activeElement.blur()');
        await page.screenshot({ path: `${ROOT}test-results/run-page-readme.png`, fullPage: true });
        await expectAccessible(page, 'run page needing confirmation');
        expect(await violations(page)).toEqual([]);
      } finally {
        await context.close();
      }
    }, 60_000);

    it('opens the run from a link on another site for a signed-in person (the cookie is sent on that navigation)', async () => {
      const runPath = `/app/pages/workspaces/network/runs/${g.runId}`;
      const chat = await startOtherSite(false, (_req, res) => {
        res
          .writeHead(200, { 'content-type': 'text/html' })
          .end(`<!doctype html><title>chat</title><a href="${g.h.baseUrl}${runPath}">Run needs attention</a>`);
      });
      const context = await newContext();
      const page = await context.newPage();
      try {
        await page.goto(`${g.h.baseUrl}${runPath}`, { waitUntil: 'domcontentloaded' });
        await signIn(page, g.owner.organizationToken);
        const signedIn = await sessions();
        await page.goto(chat.origin, { waitUntil: 'domcontentloaded' });
        await page.getByRole('link', { name: 'Run needs attention' }).click();
        await page.waitForLoadState('domcontentloaded');
        expect(page.url()).toBe(`${g.h.baseUrl}${runPath}`);
        expect(await page.getByRole('heading', { level: 1 }).textContent()).toContain(g.runId);
        // No second sign-in, no second session.
        expect(await sessions()).toBe(signedIn);
      } finally {
        await context.close();
        await chat.close();
      }
    }, 60_000);

    it("refuses a sign-in a sibling origin of the same site forces on the browser (login CSRF), with the attacker's own cookie and token", async () => {
      // The attacker gets a sign-in form of the service's for itself, and its own team's token.
      const form = await fetch(`${g.h.baseUrl}/session`);
      const planted = cookieOf(form, 'runtasks_sign_in') ?? '';
      const team = await createTeam(g.h, g.owner.organization, g.owner.organizationToken, 'attackers');
      const attackerToken = await createTeamToken(g.h, g.owner.organizationToken, team);
      const fields = { csrf: csrfIn(await form.text()), token: attackerToken };
      // Cookies know no ports: a page of 127.0.0.1 on another port sets them for the service's host too.
      const sibling = await startOtherSite(true, (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html', 'set-cookie': `${planted}; Path=/; SameSite=Lax` });
        res.end(autoSubmitting(`${g.h.baseUrl}/session`, fields));
      });
      const context = await newContext();
      const page = await context.newPage();
      try {
        const before = await sessions();
        const answered = page.waitForResponse(
          (response) => response.url() === `${g.h.baseUrl}/session` && response.request().method() === 'POST',
        );
        await page.goto(sibling.origin);
        expect((await answered).status()).toBe(403);
        expect(await sessions()).toBe(before);
        await page.goto(`${g.h.baseUrl}/app/pages`, { waitUntil: 'domcontentloaded' });
        expect(new URL(page.url()).pathname).toBe('/session');
      } finally {
        await context.close();
        await sibling.close();
      }
    }, 60_000);

    it('lets no other site sign a person out', async () => {
      const attacker = await startOtherSite(false, (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' }).end(autoSubmitting(`${g.h.baseUrl}/session/sign-out`, {}));
      });
      const context = await newContext();
      const page = await context.newPage();
      try {
        await page.goto(`${g.h.baseUrl}/app/pages`, { waitUntil: 'domcontentloaded' });
        await signIn(page, g.owner.organizationToken);
        const before = await sessions();
        const answered = page.waitForResponse((response) => response.url() === `${g.h.baseUrl}/session/sign-out`);
        await page.goto(attacker.origin);
        const response = await answered;
        expect([response.status(), await response.headerValue('set-cookie')]).toEqual([403, null]);
        expect(await sessions()).toBe(before);
        await page.goto(`${g.h.baseUrl}/app/pages`, { waitUntil: 'domcontentloaded' });
        expect(new URL(page.url()).pathname).toBe('/app/pages');
      } finally {
        await context.close();
        await attacker.close();
      }
    }, 60_000);

    it('pauses updates while a comment is written, says so, and catches up in one click keeping the comment', async () => {
      const workspaceId = await workspaceWithTasks('typing');
      const run = await createRun(g.h, g.owner.organizationToken, workspaceId, { message: 'typing' });
      const lint = await deliveryOf('pre_plan', 'mandatory', run);
      const context = await newContext();
      const page = await context.newPage();
      try {
        await page.goto(`${g.h.baseUrl}/app/pages/workspaces/typing/runs/${run}`, { waitUntil: 'domcontentloaded' });
        await signIn(page, g.owner.organizationToken);
        await page.locator('.status-line', { hasText: 'Pre-plan tasks running' }).waitFor();
        const notice = page.locator('#live-notice');
        expect(await notice.isVisible()).toBe(false);
        await page.getByLabel('Comment (optional)').fill('Canceling: wrong branch');
        await notice.getByText('Live updates are paused while you write a comment.').waitFor({ timeout: 5_000 });
        expect(await callBackWith(lint, { status: 'passed' })).toBe(200);
        // The run moves on; the page holds still and says why, several refreshes long.
        await eventually(async () =>
          (await api(g.h, 'get', `/runs/${run}`, g.owner.organizationToken)).body.data.attributes.status === 'post_plan_running'
            ? true
            : undefined,
        );
        await page.waitForTimeout(2_500);
        expect(await page.locator('.status-line').textContent()).toContain('Pre-plan tasks running');
        expect(await notice.isVisible()).toBe(true);
        await notice.getByRole('button', { name: 'Update now' }).click();
        await page.locator('.status-line', { hasText: 'Post-plan tasks running' }).waitFor({ timeout: 5_000 });
        expect(await page.getByLabel('Comment (optional)').inputValue()).toBe('Canceling: wrong branch');
        await expectAccessible(page, 'run page with updates paused');
        // Done writing: the notice goes, updates go on by themselves.
        await page.getByLabel('Comment (optional)').fill('');
        await page.getByLabel('Comment (optional)').blur();
        await notice.waitFor({ state: 'hidden', timeout: 5_000 });
        expect(await violations(page)).toEqual([]);
      } finally {
        await context.close();
      }
    }, 60_000);

    it('says visibly that the page stopped updating when its token is revoked, with the way back', async () => {
      const workspaceId = await workspaceWithTasks('revoked');
      const team = await createTeam(g.h, g.owner.organization, g.owner.organizationToken, 'readers');
      await grantWorkspace(g.h, g.owner.organizationToken, team, workspaceId, { access: 'read' });
      const readerToken = await createTeamToken(g.h, g.owner.organizationToken, team);
      const run = await createRun(g.h, g.owner.organizationToken, workspaceId, { message: 'watched' });
      const runPath = `/app/pages/workspaces/revoked/runs/${run}`;
      const context = await newContext();
      const page = await context.newPage();
      try {
        await page.goto(`${g.h.baseUrl}${runPath}`, { waitUntil: 'domcontentloaded' });
        await signIn(page, readerToken);
        await page.locator('.status-line', { hasText: 'Pre-plan tasks running' }).waitFor();
        expect((await api(g.h, 'delete', `/teams/${team}/authentication-token`, g.owner.organizationToken)).status).toBe(204);
        const notice = page.locator('#live-notice');
        await notice
          .getByText('You are signed out (or your token was revoked or expired): this page no longer updates.')
          .waitFor({ timeout: 10_000 });
        const back = notice.getByRole('link', { name: 'Sign in again' });
        expect(await back.getAttribute('href')).toBe(`/session?next=${runPath}`);
        await expectAccessible(page, 'run page signed out');
      } finally {
        await context.close();
      }
    }, 60_000);

    it('gives up on a live request that hangs, says so, and follows the run again once answers come', async () => {
      const workspaceId = await workspaceWithTasks('hanging');
      const run = await createRun(g.h, g.owner.organizationToken, workspaceId, { message: 'watched through a dropped link' });
      const context = await newContext();
      const page = await context.newPage();
      try {
        await page.goto(`${g.h.baseUrl}/app/pages/workspaces/hanging/runs/${run}`, { waitUntil: 'domcontentloaded' });
        await signIn(page, g.owner.organizationToken);
        await page.locator('.status-line', { hasText: 'Pre-plan tasks running' }).waitFor();
        // The network drops the page's live requests without a word: no answer, no error.
        const held: (() => Promise<void>)[] = [];
        await page.route('**/live', (route) => void held.push(() => route.abort()));
        const notice = page.locator('#live-notice');
        await notice
          .getByText(/^The service cannot be reached: live updates stopped\. Trying again in \d+ s\.$/)
          .waitFor({ timeout: 15_000 });
        expect(held.length).toBeGreaterThan(0);
        // Answers again: the page catches up with the run without a reload.
        await page.unroute('**/live');
        await Promise.all(held.map((release) => release().catch(() => undefined)));
        expect(await callBackWith(await deliveryOf('pre_plan', 'mandatory', run), { status: 'passed', message: 'fine' })).toBe(200);
        await page.getByRole('heading', { level: 3, name: /pre plan passed/i }).waitFor({ timeout: 30_000 });
        expect(await notice.isHidden()).toBe(true);
      } finally {
        await context.close();
      }
    }, 90_000);
  });
}

/** Text as a person reads it: runs of white space as one space. */
const squeeze = (text: string | null): string => (text ?? '').replace(/\s+/g, ' ').trim();

/** The severity badges of the scanner's result card (the second result of the run's post_plan stage). */
const scannerCardSeverity = (page: Page): Promise<string[]> =>
  page.locator('article.result').filter({ hasText: 'scanner' }).locator('.severity li').allTextContents();
