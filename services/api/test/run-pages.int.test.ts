import { describe, expect, it } from '@jest/globals';
import { api, createRun, createTeam, createTeamToken, createWorkspace, grantWorkspace } from '../../../test/support/fixtures.ts';
import { startHarness } from '../../../test/support/harness.ts';
import { type Browser, cookieOf, csrfIn, FORM } from './run-pages/http-forms.ts';
import { useRunPagesHttp } from './run-pages/http-setup.ts';

/**
 * The run pages over HTTP: sessions (cookie attributes, hashed storage, expiry, sign-out, a revoked or
 * expired token), CSRF on every form, the API's permissions and 404s, and the policy's report endpoint.
 * The browser suite (run-pages.browser.int.test.ts) drives the same pages through a real run.
 */
describe('the run pages over HTTP', () => {
  const g = useRunPagesHttp();
  const { lines, get, post, signIn, sql, stageStatus, awaitingRun } = g;

  it('sends a browser without a session to the sign-in form, and a fragment request a 401', async () => {
    const page = await get(g.runPath);
    expect([page.status, page.headers.get('location')]).toEqual([303, `/session?next=${g.runPath}`]);
    expect((await get(`${g.runPath}/live`)).status).toBe(401);
    expect((await post(`${g.runPath}/override`, undefined, { stage: g.stageId })).status).toBe(303);
    expect(await stageStatus()).toBe('awaiting_override');
  });

  it('serves the sign-in form with a strict policy and an HttpOnly, SameSite=Strict cookie (not Secure over plain HTTP)', async () => {
    const form = await get('/session');
    expect(form.status).toBe(200);
    const policy = form.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("default-src 'none'");
    expect(policy).toContain("script-src 'self'");
    expect(policy).not.toContain('unsafe');
    expect(form.headers.get('x-frame-options')).toBe('DENY');
    const [line] = form.headers.getSetCookie();
    expect(line).toMatch(/^runtasks_sign_in=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=3600; HttpOnly; SameSite=Strict$/);
    const page = await form.text();
    expect(page).toContain('<form method="post" action="/session"');
    expect(page).toContain('type="password"');
  });

  it('signs in only with the form, its CSRF token and a live token; the token never goes in a URL', async () => {
    const count = async (): Promise<number> => Number((await sql<{ count: string }>(`select count(*) from page_sessions`))[0]?.count);
    const before = await count();
    const form = await get('/session');
    const signInCookie = cookieOf(form, 'runtasks_sign_in') ?? '';
    const csrf = csrfIn(await form.text());
    const attempts: [Record<string, string>, string, number][] = [
      [{ token: g.f.organizationToken }, signInCookie, 403],
      [{ token: g.f.organizationToken, csrf: 'f'.repeat(128) }, signInCookie, 403],
      [{ token: g.f.organizationToken, csrf }, '', 403],
      [{ token: 'not-a-token', csrf }, signInCookie, 401],
      [{ token: `${g.f.organizationToken}x`, csrf }, signInCookie, 401],
    ];
    for (const [fields, cookie, status] of attempts) {
      const response = await post('/session', cookie, fields);
      expect({ fields: Object.keys(fields), status: response.status }).toEqual({ fields: Object.keys(fields), status });
      expect(cookieOf(response, 'runtasks_session')).toBeUndefined();
    }
    const asJson = await fetch(`${g.h.baseUrl}/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: signInCookie },
      body: JSON.stringify({ token: g.f.organizationToken, csrf }),
    });
    expect(asJson.status).toBe(415);
    // A token in the query string signs nothing in.
    const inUrl = await get(`/session?token=${g.f.organizationToken}&next=/app`);
    expect(cookieOf(inUrl, 'runtasks_session')).toBeUndefined();
    expect(await count()).toBe(before);
  });

  it('stores only a keyed hash of the session id, and leads on to the page asked for (never elsewhere)', async () => {
    const form = await get('/session');
    const signInCookie = cookieOf(form, 'runtasks_sign_in') ?? '';
    const csrf = csrfIn(await form.text());
    const response = await post('/session', signInCookie, { csrf, token: g.f.organizationToken, next: g.runPath });
    expect([response.status, response.headers.get('location')]).toEqual([303, g.runPath]);
    const line = response.headers.getSetCookie().find((cookie) => cookie.startsWith('runtasks_session=')) ?? '';
    expect(line).toMatch(/^runtasks_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=28800; HttpOnly; SameSite=Lax$/);
    const id = line.split(';')[0]?.split('=')[1] ?? '';
    const rows = await sql<{ id_hash: string }>(`select id_hash from page_sessions where id_hash = ?`, [g.h.secrets.hashToken(id)]);
    expect(rows).toHaveLength(1);
    expect((await sql(`select 1 from page_sessions where id_hash = ?`, [id])).length).toBe(0);
    for (const next of ['https://evil.example/app', '//evil.example/app', '/api/v2/organizations', '/app/../admin']) {
      const again = await post('/session', signInCookie, { csrf, token: g.f.organizationToken, next });
      expect({ next, location: again.headers.get('location') }).toEqual({ next, location: '/app' });
    }
  });

  it('names the cookies __Host- and marks them Secure where the service is reached over HTTPS (PUBLIC_BASE_URL)', async () => {
    const tls = await startHarness({ ops: true, env: { PUBLIC_BASE_URL: 'https://runtasks.example.com' } });
    try {
      const form = await fetch(`${tls.baseUrl}/session`);
      expect(form.headers.getSetCookie()[0]).toMatch(
        /^__Host-runtasks_sign_in=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=3600; HttpOnly; SameSite=Strict; Secure$/,
      );
      // The bare name, which a neighbouring subdomain could set over HTTPS, is not read there.
      const signInCookie = cookieOf(form, '__Host-runtasks_sign_in') ?? '';
      const fields = { csrf: csrfIn(await form.text()), token: tls.adminToken };
      const bare = await fetch(`${tls.baseUrl}/session`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': FORM, cookie: signInCookie.replace('__Host-', '') },
        body: new URLSearchParams(fields).toString(),
      });
      expect(bare.status).toBe(403);
      const signedIn = await fetch(`${tls.baseUrl}/session`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': FORM, cookie: signInCookie },
        body: new URLSearchParams(fields).toString(),
      });
      expect(signedIn.status).toBe(303);
      expect(signedIn.headers.getSetCookie()).toEqual([
        expect.stringMatching(/^__Host-runtasks_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=28800; HttpOnly; SameSite=Lax; Secure$/),
        '__Host-runtasks_sign_in=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict; Secure',
      ]);
    } finally {
      await tls.close();
    }
  });

  it('ends a session at sign-out (CSRF checked), at its expiry, and when its token is revoked or expires', async () => {
    const live = async (browser: Browser): Promise<boolean> => (await get('/app', browser.cookie)).status !== 303;
    const first = await signIn(g.f.organizationToken);
    expect(await live(first)).toBe(true);
    expect((await post('/session/sign-out', first.cookie, { csrf: 'a'.repeat(128) })).status).toBe(403);
    expect(await live(first)).toBe(true);
    const out = await post('/session/sign-out', first.cookie, { csrf: first.csrf });
    expect([out.status, out.headers.get('location')]).toEqual([303, '/session']);
    expect(out.headers.getSetCookie()[0]).toMatch(/^runtasks_session=; Path=\/; Max-Age=0;/);
    expect(await live(first)).toBe(false);

    const expiring = await signIn(g.f.organizationToken);
    await sql(`update page_sessions set expires_at = now() - interval '1 second' where id_hash = ?`, [
      g.h.secrets.hashToken(expiring.cookie.split('=')[1] ?? ''),
    ]);
    expect(await live(expiring)).toBe(false);

    const team = await createTeam(g.h, g.f.organization, g.f.organizationToken, 'short-lived');
    await grantWorkspace(g.h, g.f.organizationToken, team, g.f.workspaceId, { access: 'read' });
    const teamToken = await createTeamToken(g.h, g.f.organizationToken, team);
    const expired = await signIn(teamToken);
    expect(await live(expired)).toBe(true);
    await sql(`update api_tokens set expires_at = now() - interval '1 second' where team_id = ?`, [team]);
    expect(await live(expired)).toBe(false);

    const revokedToken = await createTeamToken(g.h, g.f.organizationToken, team);
    const revoked = await signIn(revokedToken);
    expect(await live(revoked)).toBe(true);
    await api(g.h, 'delete', `/teams/${team}/authentication-token`, g.f.organizationToken).expect(204);
    expect(await live(revoked)).toBe(false);
  });

  it('shows a foreign, a hidden and a missing page exactly alike: one 404 page', async () => {
    const owner = await signIn(g.f.organizationToken);
    const paths = [
      g.foreignRunPath,
      g.foreignRunPath.replace(/run-[A-Za-z0-9]+$/, 'run-doesnotexist00000'),
      `/app/${g.f.organization}/workspaces/${g.f.organization}-ws/runs/run-doesnotexist00000`,
      // The run, under a workspace or organization it is not in.
      g.runPath.replace(`/workspaces/${g.f.organization}-ws/`, `/workspaces/${g.other.organization}-ws/`),
      g.runPath.replace(`/app/${g.f.organization}/`, `/app/${g.other.organization}/`),
      `/app/${g.other.organization}/workspaces/${g.other.organization}-ws`,
      `/app/${g.other.organization}`,
      `/app/no-such-organization`,
      `/app/${g.f.organization}/no-such-page`,
      `/app/%E0%A4%A`,
    ];
    const pages = await Promise.all(paths.map(async (path) => ({ path, response: await get(path, owner.cookie) })));
    const bodies = await Promise.all(
      pages.map(async ({ path, response }) => ({ path, status: response.status, body: await response.text() })),
    );
    for (const page of bodies)
      expect({ path: page.path, status: page.status, body: page.body }).toEqual({ path: page.path, status: 404, body: bodies[0]?.body });
    const fragments = await Promise.all([get(`${g.foreignRunPath}/live`, owner.cookie), get(`${paths[1]}/live`, owner.cookie)]);
    expect(fragments.map((response) => response.status)).toEqual([404, 404]);
    expect(await fragments[0]?.text()).toBe(await fragments[1]?.text());
    // The same run is there for its own organization.
    expect((await get(g.runPath, owner.cookie)).status).toBe(200);
  });

  it('offers and allows an override and run actions only as the API would, with CSRF on every form', async () => {
    const reader = await signIn(g.readerToken);
    const readerPage = await (await get(g.runPath, reader.cookie)).text();
    expect(readerPage).toContain('Awaiting override');
    expect(readerPage).not.toContain('Override and continue');
    expect(readerPage).not.toContain('/actions');
    // Posted all the same: refused (no manage-policy-overrides: the page's 404; no runs:apply: the API's
    // 403 naming it, since the reader sees the run), nothing changes.
    expect((await post(`${g.runPath}/override`, reader.cookie, { csrf: reader.csrf, stage: g.stageId })).status).toBe(404);
    expect((await post(`${g.runPath}/actions`, reader.cookie, { csrf: reader.csrf, action: 'discard' })).status).toBe(403);
    expect(await stageStatus()).toBe('awaiting_override');

    const owner = await signIn(g.f.organizationToken);
    const ownerPage = await (await get(g.runPath, owner.cookie)).text();
    expect(ownerPage).toContain('Override and continue');
    expect(ownerPage).toContain('value="discard"');
    expect(ownerPage).not.toContain('value="apply"');
    expect((await post(`${g.runPath}/override`, owner.cookie, { stage: g.stageId })).status).toBe(403);
    expect((await post(`${g.runPath}/override`, owner.cookie, { csrf: reader.csrf, stage: g.stageId })).status).toBe(403);
    const crossSite = await post(
      `${g.runPath}/override`,
      owner.cookie,
      { csrf: owner.csrf, stage: g.stageId },
      { 'sec-fetch-site': 'cross-site' },
    );
    expect(crossSite.status).toBe(403);
    const tooLong = await post(`${g.runPath}/override`, owner.cookie, { csrf: owner.csrf, stage: g.stageId, comment: 'x'.repeat(10_001) });
    expect(tooLong.status).toBe(422);
    expect(await tooLong.text()).toContain('at most 10000 characters');
    expect((await post(`${g.runPath}/actions`, owner.cookie, { csrf: owner.csrf, action: 'explode' })).status).toBe(422);
    for (const stage of ['', '\u0000', 'ts-\u0000', 'x'.repeat(100), g.foreignRunPath]) {
      expect({ stage, status: (await post(`${g.runPath}/override`, owner.cookie, { csrf: owner.csrf, stage })).status }).toEqual({
        stage,
        status: 404,
      });
    }
    expect((await post(`${g.runPath}/override`, owner.cookie, { csrf: owner.csrf, stage: g.stageId, comment: 'nul \u0000' })).status).toBe(
      422,
    );
    expect(await stageStatus()).toBe('awaiting_override');

    const overridden = await post(`${g.runPath}/override`, owner.cookie, { csrf: owner.csrf, stage: g.stageId, comment: 'accepted' });
    expect([overridden.status, overridden.headers.get('location')]).toEqual([303, g.runPath]);
    expect(await stageStatus()).toBe('running');
    const again = await post(`${g.runPath}/override`, owner.cookie, { csrf: owner.csrf, stage: g.stageId });
    expect(again.status).toBe(409);
    expect(await again.text()).toContain('A task stage that is running cannot be overridden.');
    // The run is still awaiting its decision (no worker here): the API's rule refuses an apply with 409.
    expect((await post(`${g.runPath}/actions`, owner.cookie, { csrf: owner.csrf, action: 'apply' })).status).toBe(409);
    const discarded = await post(`${g.runPath}/actions`, owner.cookie, { csrf: owner.csrf, action: 'discard' });
    expect(discarded.status).toBe(303);
    expect((await sql<{ status: string }>(`select status from runs where id = ?`, [g.runId]))[0]?.status).toBe('discarded');
    await awaitingRun();
  });

  it("refuses an override form posted on one run's page with another run's stage: 404, and neither stage changes", async () => {
    const owner = await signIn(g.f.organizationToken);
    const pagePath = g.runPath;
    const ownStage = g.stageId;
    // Another run of the same organization and workspace, also awaiting an override, which the owner may override.
    await awaitingRun();
    const otherStage = g.stageId;
    expect(otherStage).not.toBe(ownStage);
    const posted = await post(`${pagePath}/override`, owner.cookie, { csrf: owner.csrf, stage: otherStage, comment: 'wrong page' });
    expect(posted.status).toBe(404);
    const statuses = await sql<{ id: string; status: string }>(`select id, status from task_stages where id in (?, ?) order by id`, [
      ownStage,
      otherStage,
    ]);
    expect(new Map(statuses.map((row) => [row.id, row.status]))).toEqual(
      new Map([
        [ownStage, 'awaiting_override'],
        [otherStage, 'awaiting_override'],
      ]),
    );
    // Nothing was recorded as overridden either.
    expect(await sql(`select id from run_events where action = 'overridden' and task_stage_id in (?, ?)`, [ownStage, otherStage])).toEqual(
      [],
    );
  });

  it('lists a workspace’s runs newest first, a page at a time, and its attached tasks for those who manage them', async () => {
    const owner = await signIn(g.f.organizationToken);
    const workspacePath = `/app/${g.f.organization}/workspaces/${g.f.organization}-ws`;
    const created = [
      await createRun(g.h, g.f.organizationToken, g.f.workspaceId),
      await createRun(g.h, g.f.organizationToken, g.f.workspaceId),
    ];
    const first = await (await get(`${workspacePath}?page%5Bsize%5D=2`, owner.cookie)).text();
    const ids = (page: string): string[] => [...page.matchAll(/<a href="[^"]+\/runs\/(run-[A-Za-z0-9]+)"/g)].map((match) => match[1] ?? '');
    expect(ids(first)).toEqual([created[1], created[0]]);
    expect(first).toContain('page%5Bnumber%5D=2&amp;page%5Bsize%5D=2">Older</a>');
    expect(first).toMatch(/<th scope="row"><bdi>scanner<\/bdi><\/th>\s*<td>post plan<\/td>\s*<td class="nowrap">mandatory<\/td>/);
    // A page size the API refuses is refused here too, with its status.
    expect((await get(`${workspacePath}?page%5Bsize%5D=1000`, owner.cookie)).status).toBe(422);
    const reader = await signIn(g.readerToken);
    const readerPage = await (await get(workspacePath, reader.cookie)).text();
    expect(readerPage).toContain(created[1]);
    expect(readerPage).toContain('Attached tasks are listed for those who may manage them.');
    const organizationPage = await (await get(`/app/${g.f.organization}`, reader.cookie)).text();
    expect(organizationPage).toContain('Run tasks are listed for those who may manage them.');
    const ownerOrganizationPage = await (await get(`/app/${g.f.organization}`, owner.cookie)).text();
    expect(ownerOrganizationPage).toContain('<th scope="row"><bdi>scanner</bdi></th>');
    // A workspace the team has no access to is not listed for it.
    await createWorkspace(g.h, g.f.organization, g.f.organizationToken, 'unlisted');
    expect(await (await get(`/app/${g.f.organization}`, reader.cookie)).text()).not.toContain('unlisted');
    expect(await (await get(`/app/${g.f.organization}`, owner.cookie)).text()).toContain('unlisted');
  });

  it('answers an unchanged live fragment with 304, and logs policy violation reports', async () => {
    const owner = await signIn(g.f.organizationToken);
    const live = await get(`${g.runPath}/live`, owner.cookie);
    expect(live.status).toBe(200);
    const etag = live.headers.get('etag') ?? '';
    expect((await get(`${g.runPath}/live`, owner.cookie, { 'if-none-match': etag })).status).toBe(304);
    await sql(`update task_results set message = 'changed', version = version + 1 where task_stage_id = ?`, [g.stageId]);
    expect((await get(`${g.runPath}/live`, owner.cookie, { 'if-none-match': etag })).status).toBe(200);
    // Metrics name the page's pattern, not the names and ids in its path.
    const metrics = await (await get('/metrics')).text();
    expect(metrics).toContain('route="/app/:organization_name/workspaces/:workspace_name/runs/:run_id/live"');
    expect(metrics).not.toContain(g.runId);

    const report = await fetch(`${g.h.baseUrl}/csp-report`, {
      method: 'POST',
      headers: { 'content-type': 'application/csp-report' },
      body: JSON.stringify({
        'csp-report': { 'document-uri': `${g.h.baseUrl}${g.runPath}`, 'violated-directive': 'script-src-elem', 'blocked-uri': 'inline' },
      }),
    });
    expect(report.status).toBe(204);
    const logged = lines
      .map((line) => JSON.parse(line) as { msg: string; directive?: string })
      .filter((line) => line.msg === 'content security policy violation');
    expect(logged.map((line) => line.directive)).toEqual(['script-src-elem']);
  });

  it('renders a bounded share of huge outcome bodies and leaves the rest to the API', async () => {
    const owner = await signIn(g.f.organizationToken);
    const [result] = await sql<{ id: string }>(`select id from task_results where task_stage_id = ?`, [g.stageId]);
    // Twenty outcomes of 100,000 characters each, as a task server may send over a few callbacks.
    await sql(
      `insert into task_result_outcomes (id, task_result_id, outcome_id, description, body, url, tags, created_at)
       select 'tro-big-' || n, ?, 'BIG-' || lpad(n::text, 2, '0'), 'large', repeat('word ', 20000), null, '{}', now() + n * interval '1 ms'
         from generate_series(1, 20) n`,
      [result?.id],
    );
    await sql(`update task_results set outcomes_count = 20 where id = ?`, [result?.id]);
    const page = await (await get(g.runPath, owner.cookie)).text();
    const shown = page.match(/<summary>Details of <bdi>BIG-\d\d<\/bdi><\/summary>/g) ?? [];
    const omitted = page.match(/Details left out here: this page already shows 1 MiB of outcome details\./g) ?? [];
    // Each body is read as 64 KiB and a character (to tell it was cut), and a page renders at most 1 MiB
    // of them: 15 shown, 5 left out.
    expect([shown.length, omitted.length]).toEqual([15, 5]);
    expect(page.length).toBeLessThan(1_500_000);
  });
});
