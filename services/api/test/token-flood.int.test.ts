import { afterAll, describe, expect, it } from '@jest/globals';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import { API_TOKEN_PREFIX, CALLBACK_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiProcess, harness, randomAdminToken, runCleanups } from '../../../test/support/cluster.ts';
import { recordFigures } from '../../../test/support/figures.ts';
import { eventually } from '../../../test/support/fixtures.ts';
import type { Harness } from '../../../test/support/harness.ts';
import { ensureAdminToken } from '../src/auth/tokens.ts';

/**
 * Floods of random well-formed tokens against an API process of its own, on the API, the callback route,
 * a task's plan read and the dashboard, with the project's statement counter (bench/lib/count-queries.ts)
 * loaded into it: without the defences every refused request costs a lookup; with them (the defaults) an
 * address past AUTH_FAILURES_PER_MINUTE is answered 429 without one, a token refused a moment ago is
 * refused again from memory, until a token is created, and an API token that no active one matches (the
 * hashes every process holds) is refused without any lookup.
 */

const SUITE = 'token-flood';
const COUNTER = new URL('../../../bench/lib/count-queries.ts', import.meta.url).pathname;
const CONCURRENCY = 16;
/**
 * The statements that look a credential up: tokens, a callback's result, the dashboard's site admin (not
 * the load of the active tokens' hashes, which reads them all and is counted on its own).
 */
// The counter keeps a statement's first 240 characters: a token's lookup, whose columns now run past
// that, is known by its start.
const LOOKUP = /token_hash = |^select t\.id, t\.kind, /;
const ACTIVE_TOKENS_LOAD = /from api_tokens where revoked_at is null/;

type Kind = 'api' | 'callback' | 'plan' | 'dashboard';
const KINDS: readonly Kind[] = ['api', 'callback', 'plan', 'dashboard'];

/** One request with a random, well-formed credential of the kind's route; its status. */
async function refusedRequest(baseUrl: string, kind: Kind): Promise<number> {
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const request =
    kind === 'api'
      ? fetch(`${baseUrl}/api/v2/organizations`, { headers: bearer(generateToken(API_TOKEN_PREFIX)) })
      : kind === 'callback'
        ? fetch(`${baseUrl}/api/v2/task-results/taskrs-${randomAlphanumeric(16)}/callback`, {
            method: 'PATCH',
            headers: { ...bearer(generateToken(CALLBACK_TOKEN_PREFIX)), 'content-type': 'application/vnd.api+json' },
            body: '{"data":{"type":"task-results","attributes":{"status":"passed"}}}',
          })
        : kind === 'plan'
          ? fetch(`${baseUrl}/api/v2/plans/plan-${randomAlphanumeric(16)}/json-output`, {
              headers: bearer(generateToken(CALLBACK_TOKEN_PREFIX)),
            })
          : fetch(`${baseUrl}/admin/queues`, {
              headers: { authorization: `Basic ${Buffer.from(`admin:${randomAlphanumeric(40)}`).toString('base64')}` },
            });
  const res = await request;
  await res.arrayBuffer();
  return res.status;
}

/** `count` requests, CONCURRENCY at a time, spread over the kinds; the statuses answered. */
async function flood(send: (kind: Kind) => Promise<number>, count: number): Promise<Record<string, number>> {
  const statuses: Record<string, number> = {};
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const kind = KINDS[next % KINDS.length] ?? 'api';
      next += 1;
      const status = String(await send(kind));
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return statuses;
}

interface Counted {
  api: ApiProcess;
  /** Statements sent since the last call, by shape, and from now on counted afresh. */
  statements(): Promise<Record<string, number>>;
}

/** An API process on the harness's database with the statement counter loaded, and `env` besides. */
async function countedApi(h: Harness, env: Record<string, string>): Promise<Counted> {
  const file = join(tmpdir(), `rt-flood-${randomAlphanumeric(8)}.json`);
  const api = await ApiProcess.create({
    databaseUrl: h.config.databaseUrl,
    redisUrl: h.config.redisUrl,
    queuePrefix: h.config.queuePrefix,
    adminToken: randomAdminToken(),
    nodeArgs: ['--import', COUNTER],
    extraEnv: { BENCH_QUERY_COUNT_FILE: file, ...env },
  });
  await api.start();
  return {
    api,
    async statements() {
      await rm(file, { force: true });
      api.signal('SIGUSR2');
      const text = await eventually(() => readFile(file, 'utf8').catch(() => undefined), 10_000, 20);
      return JSON.parse(text) as Record<string, number>;
    },
  };
}

const sum = (counts: Record<string, number>, shape = /./): number =>
  Object.entries(counts)
    .filter(([text]) => shape.test(text))
    .reduce((total, [, n]) => total + n, 0);

describe('a flood of random tokens', () => {
  afterAll(runCleanups, 60_000);

  it('without the defences, each refused request costs a lookup (the "before" figure)', async () => {
    const h = await harness({});
    const { api, statements } = await countedApi(h, { AUTH_FAILURES_PER_MINUTE: '0', AUTH_CACHE_TTL_SECONDS: '0' });
    await statements();
    const requests = 2_000;
    const statuses = await flood((kind) => refusedRequest(api.baseUrl, kind), requests);
    const counts = await statements();

    expect(statuses).toEqual({ '401': requests });
    recordFigures(SUITE, 'without the defences', {
      requests,
      lookups: sum(counts, LOOKUP),
      statements: sum(counts),
      perRequest: sum(counts) / requests,
    });
    expect(sum(counts, LOOKUP)).toBeGreaterThanOrEqual(requests);
  }, 120_000);

  it('with the defaults, 10,000 random tokens are answered 401 or 429 with the lookups bounded by the failure limit', async () => {
    const h = await harness({});
    const { api, statements } = await countedApi(h, {});
    await statements();
    const requests = 10_000;
    const startedAt = performance.now();
    const statuses = await flood((kind) => refusedRequest(api.baseUrl, kind), requests);
    const seconds = (performance.now() - startedAt) / 1000;
    const counts = await statements();
    const lookups = sum(counts, LOOKUP);
    const loads = sum(counts, ACTIVE_TOKENS_LOAD);
    recordFigures(SUITE, 'with the defaults', {
      requests,
      seconds,
      lookups,
      loads,
      statements: sum(counts),
      perRequest: sum(counts) / requests,
      statuses,
    });

    expect(Object.keys(statuses).sort()).toEqual(['401', '429']);
    expect((statuses['401'] ?? 0) + (statuses['429'] ?? 0)).toBe(requests);
    // At most AUTH_FAILURES_PER_MINUTE (20) lookups, and those in flight when the limit was reached; none
    // at all once the process trusts its set of active tokens (a random token is then refused unread).
    expect(lookups).toBeLessThanOrEqual(20 + CONCURRENCY);
    // Besides the lookups, only the process's own heartbeats (a statement a second) reached PostgreSQL, and
    // a load of the active tokens after a heartbeat heard late (the process cannot know what it missed).
    expect(sum(counts) - lookups - loads).toBeLessThanOrEqual(2 * Math.ceil(seconds) + 4);
    expect(loads).toBeLessThanOrEqual(Math.ceil(seconds / 3) + 1);
    // The admin token itself is refused too from this address now: guessing stops here.
    const admin = await fetch(`${api.baseUrl}/admin/queues`, { headers: { authorization: `Bearer ${randomAdminToken()}` } });
    expect(admin.status).toBe(429);
    expect(admin.headers.get('retry-after')).toMatch(/^\d+$/);
  }, 120_000);

  it('a token refused a moment ago is refused again without a lookup, and one created afterwards works at once', async () => {
    const h = await harness({});
    // The failure limit off: what is left is the memory of refusals.
    const { api, statements } = await countedApi(h, { AUTH_FAILURES_PER_MINUTE: '0' });
    const chosen = `chosen_${randomAlphanumeric(32)}`;
    const organizations = (token: string) =>
      fetch(`${api.baseUrl}/api/v2/organizations`, { headers: { authorization: `Bearer ${token}` } }).then((res) => res.status);
    // Once the process trusts its principal cache (it heard its heartbeat), a repeat asks nothing.
    await eventually(
      async () => {
        const probe = generateToken(API_TOKEN_PREFIX);
        expect(await organizations(probe)).toBe(401);
        await statements();
        expect(await organizations(probe)).toBe(401);
        return sum(await statements(), LOOKUP) === 0 ? true : undefined;
      },
      10_000,
      100,
    );

    const repeats = 500;
    const statuses: number[] = [];
    for (let index = 0; index < repeats; index += 1) statuses.push(await organizations(chosen));
    const counts = await statements();
    expect(new Set(statuses)).toEqual(new Set([401]));
    // No active token matches it: refused without a lookup, the first time too.
    expect(sum(counts, LOOKUP)).toBe(0);
    recordFigures(SUITE, 'one unknown token repeated', { requests: repeats, lookups: sum(counts, LOOKUP) });

    // Created by another process (this one's, as the CLI or another API process would): the insert's
    // notification makes the API forget the refusal.
    await ensureAdminToken(h.orm.em.fork(), h.secrets, chosen);
    const accepted = await eventually(async () => ((await organizations(chosen)) === 200 ? true : undefined), 2_000, 10);
    expect(accepted).toBe(true);
  }, 120_000);
});
