import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { brotliDecompressSync } from 'node:zlib';
import { api, attachTask, createRun, createTask, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../test/support/harness.ts';
import { rawGet } from '../../../test/support/raw-http.ts';
import { type ScriptedServer, startScriptedServer } from '../../../test/support/scripted-server.ts';
import { cookieOf, csrfIn, FORM } from './run-pages/http-forms.ts';

const OUTCOMES = 1000;

/**
 * A run page with a thousand outcomes, with the service's default settings (rate limit and
 * compression on): sent compressed, its unchanged live part one 304, its outcomes counted by severity,
 * and the bodies its budget leaves out one click away.
 */
describe('a run page with 1,000 outcomes', () => {
  let h: Harness;
  let f: Fixture;
  let server: ScriptedServer;
  let runPath: string;
  let cookie: string;
  const sql = <T>(query: string, params: unknown[] = []): Promise<T[]> => h.orm.em.fork().execute<T[]>(query, params);

  beforeAll(async () => {
    h = await startHarness({ ops: true });
    f = await seedOrganization(h, 'pages-scale');
    server = await startScriptedServer((_delivery, res) => void res.writeHead(200).end());
    await attachTask(h, f, f.workspaceId, await createTask(h, f, server.url, { name: 'scanner' }), 'advisory', ['post_plan']);
    const runId = await createRun(h, f.organizationToken, f.workspaceId, { message: 'many findings' });
    runPath = `/app/${f.organization}/workspaces/${f.organization}-ws/runs/${runId}`;
    const [result] = await sql<{ id: string; stage: string }>(
      `select tr.id, ts.id as stage from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = ?`,
      [runId],
    );
    // A thousand findings of 2 KB of Markdown each, a quarter at each level, as a scanner reports them.
    await sql(
      `insert into task_result_outcomes (id, task_result_id, outcome_id, description, body, url, tags, created_at)
       select 'tro-scale-' || n, ?, 'RULE-' || lpad(n::text, 4, '0'), 'Finding ' || n,
              '**Rule ' || n || '** ' || repeat('The resource allows more than it needs. ', 50), null,
              jsonb_build_object('Severity', jsonb_build_array(jsonb_build_object('label', 'S' || n, 'level', (array['error', 'warning', 'info', 'none'])[1 + n % 4]))),
              now() + n * interval '1 ms'
         from generate_series(1, ${OUTCOMES}) n`,
      [result?.id],
    );
    await sql(`update task_results set status = 'failed', outcomes_count = ${OUTCOMES}, version = version + 1 where id = ?`, [result?.id]);
    const form = await fetch(`${h.baseUrl}/session`);
    const signedIn = await fetch(`${h.baseUrl}/session`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': FORM, cookie: cookieOf(form, 'runtasks_sign_in') ?? '', origin: h.baseUrl },
      body: new URLSearchParams({ csrf: csrfIn(await form.text()), token: f.organizationToken }).toString(),
    });
    cookie = cookieOf(signedIn, 'runtasks_session') ?? '';
  }, 60_000);

  afterAll(async () => {
    await server?.close();
    await h?.close();
  });

  it('is sent compressed, and its first live refresh without a change is one 304', async () => {
    const page = await rawGet(`${h.baseUrl}${runPath}`, { cookie, 'accept-encoding': 'gzip, deflate, br' });
    expect([page.status, page.headers['content-encoding']]).toEqual([200, 'br']);
    const html = brotliDecompressSync(page.body).toString('utf8');
    expect(html.length).toBeGreaterThan(1_000_000);
    // Measured: 1.6 MB of HTML sent as 11 KB (these bodies repeat themselves; real findings compress less).
    expect(page.body.length).toBeLessThan(html.length / 10);

    const etag = /data-etag="([^"]+)"/.exec(html)?.[1]?.replaceAll('&quot;', '"') ?? '';
    const live = await rawGet(`${h.baseUrl}${runPath}/live`, { cookie, 'accept-encoding': 'gzip, deflate, br', 'if-none-match': etag });
    expect([live.status, live.body.length, live.headers.etag]).toEqual([304, 0, etag]);
  });

  it('counts the outcomes by severity, and leaves the bodies past its budget one click away', async () => {
    const html = await (await fetch(`${h.baseUrl}${runPath}`, { headers: { cookie } })).text();
    const badges = [...html.matchAll(/<li class="badge level-(\w+)">([^<]+)<\/li>/g)].map((match) => `${match[1]}: ${match[2]}`);
    // Once in the stage's header, once in its one result.
    expect(badges).toEqual([
      'error: 250 errors',
      'warning: 250 warnings',
      'info: 250 info',
      'none: 250 without a level',
      'error: 250 errors',
      'warning: 250 warnings',
      'info: 250 info',
      'none: 250 without a level',
    ]);
    expect(html).toContain('<span class="summary">1 failed (advisory)</span>');
    const shown = html.match(/<summary>Details of <bdi>RULE-\d{4}<\/bdi><\/summary>/g) ?? [];
    const links = [...html.matchAll(/<a href="([^"]+\/outcomes\/tro-scale-\d+)">Read the details of <bdi>(RULE-\d{4})<\/bdi><\/a>/g)];
    expect(shown.length + links.length).toBe(OUTCOMES);
    expect(links.length).toBeGreaterThan(0);
    expect(html).toContain('Details left out here: this page already shows 1 MiB of outcome details.');

    const [, path, outcomeId] = links[0] ?? [];
    const outcome = await fetch(`${h.baseUrl}${path}`, { headers: { cookie } });
    expect(outcome.status).toBe(200);
    const outcomePage = await outcome.text();
    expect(outcomePage).toContain(`<h1>Outcome <bdi>${outcomeId}</bdi></h1>`);
    expect(outcomePage).toMatch(/<div class="markdown"><p><strong>Rule \d+<\/strong> The resource allows more than it needs\./);
    // An outcome of another run, or none, under this run's path: the one 404.
    const other = await createRun(h, f.organizationToken, f.workspaceId);
    const missing = await fetch(`${h.baseUrl}${runPath.replace(/run-[^/]+$/, other)}/outcomes/tro-scale-1`, { headers: { cookie } });
    expect(missing.status).toBe(404);
    expect((await fetch(`${h.baseUrl}${runPath}/outcomes/tro-nothing`, { headers: { cookie } })).status).toBe(404);
    expect((await api(h, 'get', `/runs/${other}`, f.organizationToken)).status).toBe(200);
  });
});
