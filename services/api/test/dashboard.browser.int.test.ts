import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Browser } from 'playwright-core';
import { launchChromium } from '../../../test/support/browser.ts';
import { UNAUTHORIZED } from '../../../test/support/assertions.ts';
import { createRun, eventually, JSON_API, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startWorker, type RunningWorker } from '../../worker/src/worker.ts';

/**
 * The bull-board dashboard at /admin/queues in a real browser (Debian's Chromium through
 * playwright-core): site-admin credentials by HTTP Basic, read-only by default.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SCREENSHOT = `${ROOT}test-results/dashboard.png`;

const basic = (password: string): string => `Basic ${Buffer.from(`admin:${password}`).toString('base64')}`;

describe('the queue dashboard in a browser', () => {
  let h: Harness;
  let worker: RunningWorker;
  let browser: Browser;
  let org: Fixture;
  let dashboard: string;

  beforeAll(async () => {
    h = await startHarness({ ops: true, env: { DASHBOARD_READ_ONLY: 'true', RATE_LIMIT_PER_SECOND: '0' } });
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
    org = await seedOrganization(h, 'dashboard');
    await createRun(h, org.organizationToken, org.workspaceId);
    // The worker has completed at least one job (the run.created of that run).
    await eventually(async () => ((await worker.queue.getJobCounts('completed')).completed ?? 0) > 0 || undefined, 20_000);
    dashboard = `${h.baseUrl}/admin/queues`;
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await worker?.close();
    await h?.close();
  }, 30_000);

  it('answers 401 with a JSON:API body and a Basic challenge without credentials, or with a non-admin token', async () => {
    for (const authorization of [undefined, basic(org.organizationToken), `Bearer ${org.organizationToken}`, basic('not-a-token')]) {
      const res = await fetch(dashboard, { headers: authorization ? { authorization } : {} });
      expect(res.status).toBe(401);
      expect(res.headers.get('content-type')).toContain(JSON_API);
      expect(res.headers.get('www-authenticate')).toMatch(/^Basic realm="/);
      expect(await res.json()).toEqual(UNAUTHORIZED);
    }
    const api = await fetch(`${dashboard}/api/queues`);
    expect(api.status).toBe(401);
  });

  it('shows the runs queue and a completed job to a site admin, and saves a screenshot', async () => {
    const context = await browser.newContext({ httpCredentials: { username: 'admin', password: h.adminToken } });
    try {
      const page = await context.newPage();
      const response = await page.goto(dashboard, { waitUntil: 'domcontentloaded', timeout: 15_000 });
      expect(response?.status()).toBe(200);
      // The default policy of HTML answers: never framed, no inline script; the page renders under it.
      expect(response?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(response?.headers()['x-content-type-options']).toBe('nosniff');
      await page.getByText('Run Tasks queues').first().waitFor({ timeout: 15_000 });
      await page.getByText('runs', { exact: true }).first().waitFor({ timeout: 15_000 });

      await page.goto(`${dashboard}/queue/runs?status=completed`, { waitUntil: 'domcontentloaded', timeout: 15_000 });
      await page.getByText('run.created').first().waitFor({ timeout: 15_000 });

      mkdirSync(`${ROOT}test-results`, { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      expect(statSync(SCREENSHOT).size).toBeGreaterThan(0);

      // Read-only: the UI offers no job actions.
      for (const action of ['Clean', 'Retry', 'Promote', 'Pause', 'Empty', 'Obliterate']) {
        expect({ action, visible: await page.getByRole('button', { name: action, exact: true }).count() }).toEqual({ action, visible: 0 });
      }
    } finally {
      await context.close();
    }
  }, 60_000);

  it('refuses the browser with an organization token as password', async () => {
    const context = await browser.newContext({ httpCredentials: { username: 'admin', password: org.organizationToken } });
    try {
      const page = await context.newPage();
      const response = await page.goto(dashboard, { waitUntil: 'domcontentloaded', timeout: 15_000 });
      expect(response?.status()).toBe(401);
      expect(JSON.parse((await response?.text()) ?? '')).toEqual(UNAUTHORIZED);
    } finally {
      await context.close();
    }
  }, 30_000);

  it('is read-only: the write endpoints refuse a site admin (405) and change nothing', async () => {
    const before = await worker.queue.getJobCounts('completed');
    const headers = { authorization: basic(h.adminToken), 'content-type': 'application/json' };
    // bull-board's write endpoints (PUT, and POST for adding a job), as its UI would call them.
    const writes: [string, string][] = [
      ['PUT', '/api/queues/runs/clean/completed'],
      ['PUT', '/api/queues/runs/retry/failed'],
      ['PUT', '/api/queues/runs/pause'],
      // Pausing and resuming every queue at once answered 200 and did nothing.
      ['PUT', '/api/queues/pause'],
      ['PUT', '/api/queues/resume'],
      ['PUT', '/api/queues/runs/resume'],
      ['PUT', '/api/queues/runs/promote'],
      ['PUT', '/api/queues/runs/concurrency'],
      ['PUT', '/api/queues/runs/empty'],
      ['PUT', '/api/queues/runs/obliterate'],
      ['POST', '/api/queues/runs/add'],
    ];
    for (const [method, path] of writes) {
      const res = await fetch(`${dashboard}${path}`, { method, headers, body: JSON.stringify({ name: 'run.created', data: {} }) });
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 405 });
    }
    // The same path with a method no route of it takes: a JSON:API 405, and a path it has not a 404 (both
    // were once the API's errors thrown into bull-board, which made them 500s).
    const clean = await fetch(`${dashboard}/api/queues/runs/clean/completed`, { method: 'POST', headers, body: '{}' });
    expect(clean.status).toBe(405);
    expect(await clean.json()).toMatchObject({
      errors: [{ status: '405', title: 'method not allowed', detail: expect.stringContaining('read-only') }],
    });
    const propfind = await fetch(`${dashboard}/api/queues`, { method: 'PROPFIND', headers: { authorization: basic(h.adminToken) } });
    expect(propfind.status).toBe(405);
    expect(await propfind.json()).toMatchObject({ errors: [{ status: '405', title: 'method not allowed' }] });
    const unknown = await fetch(`${dashboard}/api/no-such-thing`, { headers: { authorization: basic(h.adminToken) } });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ errors: [{ status: '404', title: 'not found' }] });
    expect((await worker.queue.getJobCounts('completed')).completed).toBeGreaterThanOrEqual(before.completed ?? 0);
    expect(await worker.queue.isPaused()).toBe(false);
    // Reads still work for the admin.
    const queues = await fetch(`${dashboard}/api/queues`, { headers: { authorization: basic(h.adminToken) } });
    expect(queues.status).toBe(200);
    const body = (await queues.json()) as { queues: { name: string; readOnlyMode: boolean }[] };
    expect(body.queues.map((queue) => [queue.name, queue.readOnlyMode])).toEqual([['runs', true]]);
  });
});
