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

/** How the API limits requests: as `npm start` does by default (30 a second), or not at all. */
export type RateLimitSetting = 'default' | 'off';

/** The API, a worker, a scripted task server and Chromium, with a run under way and the calls that drive its pages. */
export function useRunPagesBrowser(rateLimit: RateLimitSetting) {
  const g = {} as {
    h: Harness;
    worker: RunningWorker;
    server: ScriptedServer;
    browser: Browser;
    owner: Fixture;
    runId: string;
    foreignRunPath: string;
    tasks: { lint: string; scanner: string; costs: string };
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
    // With the default limit, the API is built as main.ts builds it (createApiOps: the rate limiter on).
    g.h = await startHarness({
      reachableBaseUrl: true,
      logger,
      ops: rateLimit === 'default',
      env: { PAGES_REFRESH_SECONDS: '1', ...(rateLimit === 'off' ? { RATE_LIMIT_PER_SECOND: '0' } : {}) },
    });
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
    g.tasks = { lint, scanner, costs };
    await attachTasks(g.owner.workspaceId);
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

  /** lint (pre_plan, mandatory), scanner (post_plan, mandatory) and costs (post_plan, advisory) on a workspace. */
  async function attachTasks(workspaceId: string): Promise<void> {
    await attachTask(g.h, g.owner, workspaceId, g.tasks.lint, 'mandatory', ['pre_plan']);
    await attachTask(g.h, g.owner, workspaceId, g.tasks.scanner, 'mandatory', ['post_plan']);
    await attachTask(g.h, g.owner, workspaceId, g.tasks.costs, 'advisory', ['post_plan']);
  }

  /** A workspace of its own with the three tasks, so a test's runs wait for no other test's in the workspace queue. */
  async function workspaceWithTasks(name: string): Promise<string> {
    const workspaceId = await createWorkspace(g.h, g.owner.organization, g.owner.organizationToken, name);
    await attachTasks(workspaceId);
    return workspaceId;
  }

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

  /** Sessions stored now (each sign-in adds one; a sign-out or a second sign-in in one browser does not). */
  const sessions = async (): Promise<number> =>
    Number((await g.h.orm.em.fork().execute<{ count: string }[]>(`select count(*) from page_sessions`))[0]?.count);
  return Object.assign(g, { lines, deliveryOf, newContext, violations, signIn, stageHeading, sessions, workspaceWithTasks });
}
