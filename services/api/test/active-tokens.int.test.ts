import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId } from '@runtasks/shared/domain';
import { API_TOKEN_PREFIX, CALLBACK_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import type { Server } from 'node:http';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { createRun, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { buildApp } from '../src/app.ts';
import type { PrincipalCache } from '../src/auth/principal-cache.ts';
import { issueToken } from '../src/auth/tokens.ts';
import { createApiOps, type ApiOpsHandle } from '../src/ops/create-ops.ts';

const FLOOD = 5_000;
const CONCURRENCY = 16;

/**
 * Every API process holds the keyed hashes of the active tokens (PrincipalCache, ActiveTokens), with the
 * defaults (failure limit 20 a minute, principal cache on): a flood of random tokens from one address
 * never locks a valid token out from it, and revocation, creation and expiry reach both processes at once.
 * Process A is the harness's, process B a second app on the same database.
 */
describe('active tokens held in memory: two API processes on one database', () => {
  let h: Harness;
  let b: { ops: ApiOpsHandle; server: Server; http: TestAgent };
  let f: Fixture;

  const cacheOf = (ops: ApiOpsHandle | undefined): PrincipalCache => {
    const cache = ops?.ops.principalCache;
    if (!cache) throw new Error('no principal cache');
    return cache;
  };
  const status = async (http: TestAgent, token: string): Promise<number> =>
    (await http.get(`/api/v2/organizations/${f.organization}`).set('Authorization', `Bearer ${token}`)).status;
  const sql = <T>(text: string, params: unknown[] = []): Promise<T[]> => h.orm.em.fork().getConnection().execute<T[]>(text, params);

  beforeAll(async () => {
    h = await startHarness({ ops: true });
    const ops = createApiOps({ config: h.config, orm: h.orm, secrets: h.secrets, logger: h.logger });
    const app = buildApp({ config: h.config, orm: h.orm, secrets: h.secrets, logger: h.logger, taskClient: h.taskClient, ops: ops.ops });
    const server: Server = await new Promise((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    b = { ops, server, http: request(server) };
    await eventually(async () => (cacheOf(h.ops).trusted && cacheOf(b.ops).trusted ? true : undefined));
    f = await seedOrganization(h, 'active-tokens');
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => b?.server.close(() => resolve()));
    await b?.ops.close();
    await h?.close();
  });

  it('refuses a token no active one matches without a lookup, and accepts one created through the other process at once', async () => {
    for (let index = 0; index < 10; index += 1) {
      const created = await request(h.server)
        .post(`/api/v2/organizations/${f.organization}/authentication-token`)
        .set('Authorization', `Bearer ${h.adminToken}`);
      expect(created.status).toBe(201);
      // Used at once through the other process, which may not have heard of it yet: it waits until it has.
      expect(await status(b.http, created.body.data.attributes.token as string)).toBe(200);
    }
    const unknown = generateToken(API_TOKEN_PREFIX);
    expect(await cacheOf(b.ops).provenUnknown(h.secrets.hashToken(unknown))).toBe(true);
    expect(await cacheOf(b.ops).provenUnknown(h.secrets.hashToken(h.adminToken))).toBe(false);
  });

  it('a token revoked through one process is refused by both as soon as they hear it', async () => {
    const { secret, token } = await issueToken(h.orm.em.fork(), h.secrets, { kind: 'admin', description: 'revoked' });
    await eventually(async () => ((await status(h.http, secret)) === 200 && (await status(b.http, secret)) === 200 ? true : undefined));
    await sql(`update api_tokens set revoked_at = now() where id = ?`, [token.id]);
    await eventually(
      async () => ((await status(h.http, secret)) === 401 && (await status(b.http, secret)) === 401 ? true : undefined),
      3_000,
    );
    const hash = h.secrets.hashToken(secret);
    await eventually(async () => (!cacheOf(h.ops).isActive(hash) && !cacheOf(b.ops).isActive(hash) ? true : undefined), 3_000);
  });

  it('honours an expiry: a token is refused by both once it has passed, as no longer active', async () => {
    const { secret, token } = await issueToken(h.orm.em.fork(), h.secrets, { kind: 'admin', description: 'expiring' });
    await sql(`update api_tokens set expires_at = now() + interval '2 seconds' where id = ?`, [token.id]);
    await eventually(async () => ((await status(h.http, secret)) === 200 && (await status(b.http, secret)) === 200 ? true : undefined));
    await eventually(
      async () => ((await status(h.http, secret)) === 401 && (await status(b.http, secret)) === 401 ? true : undefined),
      10_000,
    );
    expect([cacheOf(h.ops).isActive(h.secrets.hashToken(secret)), cacheOf(b.ops).isActive(h.secrets.hashToken(secret))]).toEqual([
      false,
      false,
    ]);
  });

  it("holds task results' stored access tokens too: one written after the processes started works at once, a random one costs no lookup", async () => {
    // A run whose post_plan result is open with a stored, unbound token, as versions before derived tokens
    // (and before bound ones) wrote it: after both processes loaded their sets.
    const [org] = await sql<{ id: string }>(`select id from organizations where name = ?`, [f.organization]);
    const taskId = newId('task');
    await sql(
      `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
       values (?, ?, 'stored-token', 'https://tasks.example.com/', 'task', true, false, '{}', 'advisory', now(), now())`,
      [taskId, org?.id],
    );
    await sql(
      `insert into workspace_tasks (id, workspace_id, task_id, enforcement_level, stages, created_at, updated_at)
       values (?, ?, ?, 'advisory', '{post_plan}', now(), now())`,
      [newId('workspaceTask'), f.workspaceId, taskId],
    );
    // The site admin's: the organization token was replaced by the first test's.
    const runId = await createRun(h, h.adminToken, f.workspaceId);
    const [result] = await sql<{ id: string; callback_token_hash: string | null }>(
      `select tr.id, tr.callback_token_hash from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = ?`,
      [runId],
    );
    if (!result) throw new Error('no task result');
    expect(result.callback_token_hash).toBeNull();
    const stored = generateToken(CALLBACK_TOKEN_PREFIX);
    const hash = h.secrets.hashToken(stored);
    expect(await cacheOf(b.ops).provenUnknown(hash)).toBe(true);
    await sql(
      `update task_results set status = 'running', callback_token_hash = ?, status_timestamps = jsonb_build_object('running-at', now()),
              progress_deadline = now() + interval '10 minutes', hard_deadline = now() + interval '1 hour' where id = ?`,
      [hash, result.id],
    );
    await sql(`update task_stages set status = 'running' where run_id = ?`, [runId]);
    // Written by another process: its notification reaches both sets.
    await eventually(async () => (cacheOf(h.ops).isActive(hash) && cacheOf(b.ops).isActive(hash) ? true : undefined), 3_000);
    const callback = (token: string) =>
      b.http
        .patch(`/api/v2/task-results/${result.id}/callback`)
        .set('Authorization', `Bearer ${token}`)
        .set('Content-Type', 'application/vnd.api+json')
        .send({ data: { type: 'task-results', attributes: { status: 'running', message: 'still at it' } } });
    expect((await callback(stored)).status).toBe(200);
    // A random token, for this result or for none: refused, proven unknown without a lookup.
    for (const token of [generateToken(CALLBACK_TOKEN_PREFIX), h.secrets.bindToken(CALLBACK_TOKEN_PREFIX, 'taskrs-0000000000000000')]) {
      expect(await cacheOf(b.ops).provenUnknown(h.secrets.hashToken(token))).toBe(true);
      expect((await callback(token)).status).toBe(401);
    }
    // The one derived for the result is not its token: it has a stored one.
    expect((await callback(h.secrets.deriveToken(CALLBACK_TOKEN_PREFIX, result.id))).status).toBe(401);
    expect((await callback(stored)).status).toBe(200);
  });

  // Last: the flood leaves the test's address past its failure limit for a minute.
  it('answers a valid token 200 at once after a flood of random tokens from its own address', async () => {
    // Never used before the flood: no process remembers its principal, so it needs a lookup.
    const { secret: unused } = await issueToken(h.orm.em.fork(), h.secrets, { kind: 'admin', description: 'flood' });
    await eventually(async () => (cacheOf(h.ops).isActive(h.secrets.hashToken(unused)) ? true : undefined));
    const statuses: Record<string, number> = {};
    let sent = 0;
    const lane = async (): Promise<void> => {
      while (sent < FLOOD) {
        sent += 1;
        const code = String(await status(h.http, generateToken(API_TOKEN_PREFIX)));
        statuses[code] = (statuses[code] ?? 0) + 1;
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, lane));
    expect(Object.keys(statuses).sort()).toEqual(['401', '429']);
    expect((statuses['401'] ?? 0) + (statuses['429'] ?? 0)).toBe(FLOOD);
    // The address is past its failures: another random token is refused 429 …
    expect(await status(h.http, generateToken(API_TOKEN_PREFIX))).toBe(429);
    // … but valid tokens from it are answered at once, the remembered admin token and the unused one alike.
    expect(await status(h.http, h.adminToken)).toBe(200);
    expect(await status(h.http, unused)).toBe(200);
  }, 300_000);
});
