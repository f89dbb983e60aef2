import { afterAll, beforeAll } from '@jest/globals';
import { loggerOptions } from '@runtasks/shared/logger';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { launchChromium } from '../../../../test/support/browser.ts';
import { pino } from 'pino';
import {
  attachTask,
  createOrganization,
  createOrganizationToken,
  createRun,
  createTask,
  createWorkspace,
  eventually,
  type Fixture,
} from '../../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../../test/support/harness.ts';
import { type RunTaskPayload, type ScriptedServer, startScriptedServer } from '../../../../test/support/scripted-server.ts';
import { type RunningWorker, startWorker } from '../../../worker/src/worker.ts';
import { RECORD_VIOLATIONS } from './browser-content.ts';

/** The API, a worker, a scripted task server and Chromium, with a run under way and the calls that drive its pages. */
export function useRunPagesBrowser() {
  const g = {} as {
    h: Harness;
    worker: RunningWorker;
    server: ScriptedServer;
    browser: Browser;
    owner: Fixture;
    runId: string;
    foreignRunPath: string;
  };
  const lines: string[] = [];

  type Payload = RunTaskPayload & { stage: string; task_result_enforcement_level: string; run_app_url: string; workspace_app_url: string };
  /** A run's delivery for a stage and enforcement level (one task each: lint, scanner, costs); the first run's unless told. */
  const deliveryOf = (stage: string, enforcement: string, run = g.runId): Promise<Payload> =>
    eventually(async () => {
      const payloads = g.server.deliveries.map((delivery) => delivery.payload as Payload);
      return payloads.find(
        (payload) => payload.run_id === run && payload.stage === stage && payload.task_result_enforcement_level === enforcement,
      );
    }, 20_000);

  beforeAll(async () => {
    const logger = pino(loggerOptions('warn', 'run-pages-test'), { write: (line: string) => void lines.push(line) });
    g.h = await startHarness({ reachableBaseUrl: true, logger, env: { PAGES_REFRESH_SECONDS: '1', RATE_LIMIT_PER_SECOND: '0' } });
    g.worker = await startWorker({
      config: g.h.config,
      orm: g.h.orm,
      logger: g.h.logger,
      secrets: g.h.secrets,
      taskClient: g.h.taskClient,
    });
    g.server = await startScriptedServer((_delivery, res) => void res.writeHead(200).end());
    const organization = await createOrganization(g.h, 'pages', { 'task-overrides-enabled': true });
    const organizationToken = await createOrganizationToken(g.h, organization);
    g.owner = {
      organization,
      organizationToken,
      workspaceId: await createWorkspace(g.h, organization, organizationToken, 'network'),
      teamId: '',
    };
    const lint = await createTask(g.h, g.owner, g.server.url, { name: 'lint' });
    const scanner = await createTask(g.h, g.owner, g.server.url, { name: 'scanner' });
    const costs = await createTask(g.h, g.owner, g.server.url, { name: 'costs' });
    await attachTask(g.h, g.owner, g.owner.workspaceId, lint, 'mandatory', ['pre_plan']);
    await attachTask(g.h, g.owner, g.owner.workspaceId, scanner, 'mandatory', ['post_plan']);
    await attachTask(g.h, g.owner, g.owner.workspaceId, costs, 'advisory', ['post_plan']);
    g.runId = await createRun(g.h, organizationToken, g.owner.workspaceId, { message: 'Upgrade <b>openssl</b>', 'auto-apply': true });

    const other = await createOrganization(g.h, 'elsewhere');
    const otherToken = await createOrganizationToken(g.h, other);
    const otherWorkspace = await createWorkspace(g.h, other, otherToken, 'secret-ws');
    g.foreignRunPath = `/app/${other}/workspaces/secret-ws/runs/${await createRun(g.h, otherToken, otherWorkspace)}`;
    g.browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await g.browser?.close();
    await g.server?.close();
    await g.worker?.close();
    await g.h?.close();
  }, 30_000);

  /** A browser context that records every violation of the pages' policy in the page itself. */
  async function newContext(colorScheme: 'light' | 'dark' = 'light'): Promise<BrowserContext> {
    const context = await g.browser.newContext({ colorScheme, viewport: { width: 1100, height: 900 } });
    await context.addInitScript({ content: RECORD_VIOLATIONS });
    return context;
  }

  const violations = (page: Page): Promise<string[]> => page.evaluate<string[]>('window.__violations');

  async function signIn(page: Page, token: string): Promise<void> {
    await page.getByLabel('API token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForLoadState('domcontentloaded');
  }

  const stageHeading = (page: Page, stage: string) => page.getByRole('heading', { level: 3, name: new RegExp(`^${stage}`, 'i') });
  return Object.assign(g, { lines, deliveryOf, newContext, violations, signIn, stageHeading });
}
