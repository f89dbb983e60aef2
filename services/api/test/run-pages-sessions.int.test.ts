import { describe, expect, it } from '@jest/globals';
import { cookieOf, csrfIn } from './run-pages/http-forms.ts';
import { useRunPagesHttp } from './run-pages/http-setup.ts';

/**
 * The pages' session model over HTTP, with the headers browsers send: a signed-in link from another
 * site opens the run (Lax), while sign-in, sign-out and every action refuse anything not from this
 * origin; a sign-in replaces the browser's session; a cookie someone else planted is trusted in no copy.
 */
describe('run page sessions', () => {
  const g = useRunPagesHttp();
  const { get, post, signIn, sql } = g;
  /** "now", or a few seconds ago on a slow machine. */
  const JUST_NOW = '(now|\\d+ seconds? ago)';
  const textOf = (markup: string): string =>
    markup
      .replace(/<[^>]+>/g, '')
      .replace(/\s+/g, ' ')
      .trim();
  const sessions = async (): Promise<number> => Number((await sql<{ count: string }>(`select count(*) from page_sessions`))[0]?.count);

  /** The sign-in form as a browser gets it: its cookie and its CSRF token. */
  async function signInForm(): Promise<{ cookie: string; csrf: string }> {
    const form = await get('/session');
    return { cookie: cookieOf(form, 'runtasks_sign_in') ?? '', csrf: csrfIn(await form.text()) };
  }

  it('opens the run for a signed-in browser following a link from another site (a top-level navigation)', async () => {
    const owner = await signIn(g.f.organizationToken);
    const navigation = { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' };
    const page = await get(g.runPath, owner.cookie, navigation);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(g.runId);
    // The cookie is Lax: sent on such a navigation, never on another site's POST or fetch (the browser's rule).
    const form = await signInForm();
    const signedIn = await post('/session', form.cookie, { csrf: form.csrf, token: g.f.organizationToken });
    expect(signedIn.headers.getSetCookie()[0]).toMatch(/; SameSite=Lax$/);
  });

  it('refuses a sign-in posted from a sibling subdomain or another site (login CSRF), and starts no session', async () => {
    const before = await sessions();
    const form = await signInForm();
    const fields = { csrf: form.csrf, token: g.f.organizationToken };
    const senders: Record<string, string>[] = [
      { 'sec-fetch-site': 'same-site' },
      { 'sec-fetch-site': 'cross-site' },
      { origin: 'http://evil.runtasks.test' },
      { origin: 'null' },
    ];
    for (const headers of senders) {
      const response = await post('/session', form.cookie, fields, headers);
      expect({ headers, status: response.status, cookies: response.headers.getSetCookie() }).toEqual({ headers, status: 403, cookies: [] });
    }
    expect(await sessions()).toBe(before);
    // From the page itself (same-origin, or the Origin of the service), the same form signs in.
    const own = await post('/session', form.cookie, fields, { origin: g.h.baseUrl });
    expect(own.status).toBe(303);
    const same = await post('/session', (await signInForm()).cookie, fields, { 'sec-fetch-site': 'same-origin' });
    expect(same.status).toBe(403);
  });

  it('refuses a pre-sign-in cookie the form did not give this browser, and one sent twice', async () => {
    const ours = await signInForm();
    const theirs = await signInForm();
    // A binding and a token from two different forms: the token is not this browser's.
    expect((await post('/session', ours.cookie, { csrf: theirs.csrf, token: g.f.organizationToken })).status).toBe(403);
    // A second copy of the cookie (planted for a narrower path or a parent domain): neither is trusted.
    const twice = `${theirs.cookie}; ${ours.cookie}`;
    expect((await post('/session', twice, { csrf: ours.csrf, token: g.f.organizationToken })).status).toBe(403);
  });

  it('lets no other site sign a person out; without a session a sign-out changes nothing', async () => {
    const owner = await signIn(g.f.organizationToken);
    const live = async (): Promise<number> => (await get(g.runPath, owner.cookie)).status;
    // An auto-submitted form from elsewhere: no cookie rides along (SameSite), and it is refused before anything.
    const crossSite = await post('/session/sign-out', undefined, {}, { 'sec-fetch-site': 'cross-site' });
    expect([crossSite.status, crossSite.headers.getSetCookie()]).toEqual([403, []]);
    const withCookie = await post('/session/sign-out', owner.cookie, { csrf: owner.csrf }, { 'sec-fetch-site': 'same-site' });
    expect([withCookie.status, withCookie.headers.getSetCookie()]).toEqual([403, []]);
    expect(await live()).toBe(200);
    // Same origin, no session: on to the sign-in form, cookies untouched.
    const none = await post('/session/sign-out', undefined, {}, { 'sec-fetch-site': 'same-origin' });
    expect([none.status, none.headers.get('location'), none.headers.getSetCookie()]).toEqual([303, '/session', []]);
    expect(await live()).toBe(200);
    const out = await post('/session/sign-out', owner.cookie, { csrf: owner.csrf }, { 'sec-fetch-site': 'same-origin' });
    expect(out.status).toBe(303);
    expect(await live()).toBe(303);
  });

  it('replaces the browser’s session at sign-in, and trusts no copy of a session cookie sent twice', async () => {
    const first = await signIn(g.f.organizationToken);
    const before = await sessions();
    const form = await signInForm();
    const again = await post('/session', `${first.cookie}; ${form.cookie}`, { csrf: form.csrf, token: g.readerToken });
    expect(again.status).toBe(303);
    const second = cookieOf(again, 'runtasks_session') ?? '';
    expect(second).not.toBe(first.cookie);
    // One session in place of the other, and the first one's id opens nothing any more.
    expect(await sessions()).toBe(before);
    expect((await get('/app', first.cookie)).status).toBe(303);
    expect((await get(g.runPath, second)).status).toBe(200);
    // A planted second copy (`runtasks_session` for path /app, sent first): signed out, not the planted session.
    const planted = `${second.replace(/=.*/, '=')}${'x'.repeat(43)}; ${second}`;
    const page = await get(g.runPath, planted);
    expect([page.status, page.headers.get('location')]).toEqual([303, `/session?next=${g.runPath}`]);
  });

  it('shows who overrode a stage, when, and the comment; and who discarded the run', async () => {
    const owner = await signIn(g.f.organizationToken);
    const overridden = await post(`${g.runPath}/override`, owner.cookie, {
      csrf: owner.csrf,
      stage: g.stageId,
      comment: 'Accepted: \u202Eodd text',
    });
    expect(overridden.status).toBe(303);
    const page = await (await get(g.runPath, owner.cookie)).text();
    const note = /<p class="override-note">([\s\S]*?)<\/p>/.exec(page)?.[1] ?? '';
    expect(textOf(note)).toMatch(new RegExp(`^Overridden by owners of ${g.f.organization}, ${JUST_NOW}: Accepted: \u202Eodd text$`));
    // The comment's direction override stays inside it; the time says when exactly.
    expect(note).toContain('<q class="comment"><bdi>Accepted: \u202Eodd text</bdi></q>');
    expect(note).toMatch(
      /<time datetime="\d{4}-[^"]+Z" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC" data-relative="">(now|\d+ seconds? ago)<\/time>/,
    );
    expect(page).toMatch(/<h3 id="stage-[^"]+">post plan <span class="badge tone-warn">Overridden<\/span><\/h3>/);
    const discard = await post(`${g.runPath}/actions`, owner.cookie, { csrf: csrfIn(page), action: 'discard', comment: 'Not today' });
    expect(discard.status).toBe(303);
    const discarded = await (await get(g.runPath, owner.cookie)).text();
    const decision = /<dt>Discarded<\/dt>\s*<dd class="decision">([\s\S]*?)<\/dd>/.exec(discarded)?.[1] ?? '';
    expect(textOf(decision)).toMatch(new RegExp(`^by owners of ${g.f.organization}, ${JUST_NOW}: Not today$`));
    expect(discarded).toContain('<span class="badge tone-muted">Discarded</span>');
    await g.awaitingRun();
  });
});
