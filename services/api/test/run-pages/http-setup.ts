import { afterAll, beforeAll, expect } from '@jest/globals';
import { loggerOptions } from '@runtasks/shared/logger';
import { pino } from 'pino';
import {
  api,
  attachTask,
  createRun,
  createTask,
  createTeamToken,
  type Fixture,
  grantWorkspace,
  seedOrganization,
} from '../../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../../test/support/harness.ts';
import { type ScriptedServer, startScriptedServer } from '../../../../test/support/scripted-server.ts';
import { type Browser, cookieOf, csrfIn, FORM } from './http-forms.ts';

/** The API, a scripted task server, two organizations and a run waiting for an override; and the requests a browser makes. */
export function useRunPagesHttp() {
  const g = {} as {
    h: Harness;
    server: ScriptedServer;
    f: Fixture;
    other: Fixture;
    readerToken: string;
    runId: string;
    runPath: string;
    stageId: string;
    foreignRunPath: string;
  };
  const lines: string[] = [];

  const get = (path: string, cookie?: string, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${g.h.baseUrl}${path}`, { redirect: 'manual', headers: { ...(cookie ? { cookie } : {}), ...headers } });
  const post = (path: string, cookie: string | undefined, fields: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(`${g.h.baseUrl}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': FORM, ...(cookie ? { cookie } : {}), ...headers },
      body: new URLSearchParams(fields).toString(),
    });

  /** Signs in as a browser does: the form (its cookie and CSRF token), then the token posted. */
  async function signIn(token: string, base = g.h.baseUrl): Promise<Browser> {
    const form = await fetch(`${base}/session`, { redirect: 'manual' });
    const signInCookie = cookieOf(form, 'runtasks_sign_in') ?? '';
    const response = await fetch(`${base}/session`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': FORM, cookie: signInCookie },
      body: new URLSearchParams({ csrf: csrfIn(await form.text()), token }).toString(),
    });
    expect(response.status).toBe(303);
    const cookie = cookieOf(response, 'runtasks_session') ?? '';
    const home = await fetch(`${base}/app`, { redirect: 'manual', headers: { cookie } });
    const page =
      home.status === 200
        ? await home.text()
        : await (await fetch(`${base}${home.headers.get('location')}`, { headers: { cookie } })).text();
    return { cookie, csrf: csrfIn(page) };
  }

  const sql = <T>(query: string, params: unknown[] = []): Promise<T[]> => g.h.orm.em.fork().execute<T[]>(query, params);
  const stageStatus = async (): Promise<string | undefined> =>
    (await sql<{ status: string }>(`select status from task_stages where id = ?`, [g.stageId]))[0]?.status;

  /** A run held at its post_plan stage awaiting an override, as the worker leaves one (set up directly: no worker here). */
  async function awaitingRun(): Promise<void> {
    g.runId = await createRun(g.h, g.f.organizationToken, g.f.workspaceId, { message: 'held' });
    const [stage] = await sql<{ id: string }>(`select id from task_stages where run_id = ?`, [g.runId]);
    g.stageId = stage?.id ?? '';
    await sql(`update task_stages set status = 'awaiting_override' where id = ?`, [g.stageId]);
    await sql(`update task_results set status = 'failed' where task_stage_id = ?`, [g.stageId]);
    await sql(`update runs set status = 'post_plan_awaiting_decision' where id = ?`, [g.runId]);
    g.runPath = `/app/${g.f.organization}/workspaces/${g.f.organization}-ws/runs/${g.runId}`;
  }

  beforeAll(async () => {
    const logger = pino(loggerOptions('warn', 'run-pages-http'), { write: (line: string) => void lines.push(line) });
    g.h = await startHarness({ logger, env: { RATE_LIMIT_PER_SECOND: '0' } });
    g.f = await seedOrganization(g.h, 'pages-http');
    await api(g.h, 'patch', `/organizations/${g.f.organization}`, g.h.adminToken, {
      data: { type: 'organizations', attributes: { 'task-overrides-enabled': true } },
    }).expect(200);
    // Answers the task's verification; no worker runs here, so nothing is delivered to it.
    g.server = await startScriptedServer((_delivery, res) => void res.writeHead(200).end());
    const task = await createTask(g.h, g.f, g.server.url, { name: 'scanner' });
    await attachTask(g.h, g.f, g.f.workspaceId, task);
    // A team that may read the workspace's runs, and nothing more.
    await grantWorkspace(g.h, g.f.organizationToken, g.f.teamId, g.f.workspaceId, { access: 'read' });
    g.readerToken = await createTeamToken(g.h, g.f.organizationToken, g.f.teamId);
    await awaitingRun();
    g.other = await seedOrganization(g.h, 'pages-other');
    g.foreignRunPath = `/app/${g.other.organization}/workspaces/${g.other.organization}-ws/runs/${await createRun(g.h, g.other.organizationToken, g.other.workspaceId)}`;
  }, 60_000);

  afterAll(async () => {
    await g.server?.close();
    await g.h?.close();
  });
  return Object.assign(g, { lines, get, post, signIn, sql, stageStatus, awaitingRun });
}
