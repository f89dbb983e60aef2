import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { inTransaction, nativePool, TOKEN_CREATED } from '@runtasks/shared/db';
import { PRINCIPALS_CHANNEL } from '@runtasks/shared/queue';
import type { Server } from 'node:http';
import pg from 'pg';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { createTeamToken, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { buildApp } from '../src/app.ts';
import { PrincipalCache } from '../src/auth/principal-cache.ts';
import { issueToken } from '../src/auth/tokens.ts';
import { createApiOps, type ApiOpsHandle } from '../src/ops/create-ops.ts';

/**
 * The principal cache (AUTH_CACHE_TTL_SECONDS) of API processes sharing one database: process A is the
 * harness's, process B a second app on the same database with its own cache. The TTL is an hour, so
 * whatever is forgotten here was forgotten because of a notification or a lost connection.
 */

const HOUR = '3600';

describe('principal cache: two API processes on one database', () => {
  let h: Harness;
  let b: { ops: ApiOpsHandle; server: Server; http: TestAgent };
  let f: Fixture;

  const cacheOf = (ops: ApiOpsHandle | undefined): PrincipalCache => {
    const cache = ops?.ops.principalCache;
    if (!cache) throw new Error('no principal cache');
    return cache;
  };
  const cacheA = (): PrincipalCache => cacheOf(h.ops);
  const cacheB = (): PrincipalCache => cacheOf(b.ops);
  const sql = <T>(text: string, params: unknown[] = []): Promise<T[]> => h.orm.em.fork().getConnection().execute<T[]>(text, params);
  /** As an operator who switched triggers off would: the caches hear nothing of it. `$1`-style parameters. */
  const silently = async (text: string, params: unknown[]): Promise<void> => {
    await inTransaction(await nativePool(h.orm.em), async (client) => {
      await client.query(`set local session_replication_role = replica`);
      await client.query(text, params);
    });
  };
  const status = async (http: TestAgent, token: string): Promise<number> =>
    (await http.get(`/api/v2/organizations/${f.organization}`).set('Authorization', `Bearer ${token}`)).status;
  const listenerPids = async (): Promise<number[]> =>
    (
      await sql<{ pid: number }>(`select pid from pg_stat_activity where datname = current_database() and query = ? order by pid`, [
        `listen ${PRINCIPALS_CHANNEL}`,
      ])
    ).map((row) => row.pid);
  /** Revoked with the triggers off: both processes still accept it, from memory (the database would refuse it). */
  const revokeUnheard = async (token: string): Promise<void> => {
    await silently(`update api_tokens set revoked_at = now() where token_hash = $1`, [h.secrets.hashToken(token)]);
    expect([await status(h.http, token), await status(b.http, token)]).toEqual([200, 200]);
  };
  const refusedByBoth = (token: string, timeoutMs?: number): Promise<true> =>
    eventually(async () => ((await status(h.http, token)) === 401 && (await status(b.http, token)) === 401 ? true : undefined), timeoutMs);
  /** A fresh organization token, known to both processes. */
  const tokenKnownToBoth = async (): Promise<string> => {
    const res = await request(h.server)
      .post(`/api/v2/organizations/${f.organization}/authentication-token`)
      .set('Authorization', `Bearer ${h.adminToken}`);
    expect(res.status).toBe(201);
    const token = res.body.data.attributes.token as string;
    expect([await status(h.http, token), await status(b.http, token)]).toEqual([200, 200]);
    return token;
  };

  /**
   * A fresh site-admin token, known to both processes. Creating a token notifies nothing (its changes and
   * deletions do), so no notification delivered late can make a process forget it before a test's
   * unheard change: an organization token's creation revokes the previous one, which is notified.
   */
  const unannouncedTokenKnownToBoth = async (): Promise<string> => {
    const { secret } = await issueToken(h.orm.em.fork(), h.secrets, { kind: 'admin', description: 'principal cache' });
    expect([await status(h.http, secret), await status(b.http, secret)]).toEqual([200, 200]);
    return secret;
  };

  beforeAll(async () => {
    h = await startHarness({ ops: true, env: { AUTH_CACHE_TTL_SECONDS: HOUR } });
    const ops = createApiOps({ config: h.config, orm: h.orm, secrets: h.secrets, logger: h.logger });
    const app = buildApp({ config: h.config, orm: h.orm, secrets: h.secrets, logger: h.logger, taskClient: h.taskClient, ops: ops.ops });
    const server: Server = await new Promise((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    b = { ops, server, http: request(server) };
    await eventually(async () => (cacheA().trusted && cacheB().trusted ? true : undefined));
    f = await seedOrganization(h, 'principal-cache');
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => b?.server.close(() => resolve()));
    await b?.ops.close();
    await h?.close();
  });

  it('serves a token it knows from memory: a change it is not told of goes unseen until it is told', async () => {
    const token = await unannouncedTokenKnownToBoth();
    await revokeUnheard(token);
    // Any notification on the channel makes every process forget.
    await sql(`select pg_notify(?, '')`, [PRINCIPALS_CHANNEL]);
    await refusedByBoth(token);
  });

  it('a token revoked through one process is refused by it at once and by the other as soon as it hears', async () => {
    const token = await tokenKnownToBoth();
    const revoked = await request(h.server)
      .delete(`/api/v2/organizations/${f.organization}/authentication-token`)
      .set('Authorization', `Bearer ${h.adminToken}`);
    expect(revoked.status).toBe(204);
    expect(await status(h.http, token)).toBe(401);
    await eventually(async () => ((await status(b.http, token)) === 401 ? true : undefined), 5_000);
  });

  it('the process that revokes a token forgets it itself, without waiting for any notification', async () => {
    const token = await tokenKnownToBoth();
    // With the trigger off, only the revoking process's own forgetting can refuse the token: the other
    // process, told nothing, still answers from memory.
    await sql(`alter table api_tokens disable trigger api_tokens_principal_update`);
    try {
      const revoked = await request(h.server)
        .delete(`/api/v2/organizations/${f.organization}/authentication-token`)
        .set('Authorization', `Bearer ${h.adminToken}`);
      expect(revoked.status).toBe(204);
      expect([await status(h.http, token), await status(b.http, token)]).toEqual([401, 200]);
    } finally {
      await sql(`alter table api_tokens enable trigger api_tokens_principal_update`);
    }
    await sql(`select pg_notify(?, '')`, [PRINCIPALS_CHANNEL]);
    await refusedByBoth(token);
  });

  it.each([
    ['revoked', `update api_tokens set revoked_at = now() where token_hash = ?`],
    ['expired', `update api_tokens set expires_at = now() - interval '1 second' where token_hash = ?`],
    ['deleted', `delete from api_tokens where token_hash = ?`],
  ])('a token %s in SQL (the CLI, an operator) is refused by both processes', async (_, statement) => {
    const token = await tokenKnownToBoth();
    await sql(statement, [h.secrets.hashToken(token)]);
    await refusedByBoth(token, 5_000);
  });

  it("a team's permissions changed in SQL reach a team token's requests in both processes", async () => {
    await sql(`update teams set manage_workspaces = true where id = ?`, [f.teamId]);
    const teamToken = await createTeamToken(h, h.adminToken, f.teamId);
    const createWorkspace = (http: TestAgent, name: string) =>
      http
        .post(`/api/v2/organizations/${f.organization}/workspaces`)
        .set('Authorization', `Bearer ${teamToken}`)
        .set('Content-Type', 'application/vnd.api+json')
        .send(JSON.stringify({ data: { type: 'workspaces', attributes: { name } } }));
    expect((await createWorkspace(h.http, 'by-team-a')).status).toBe(201);
    expect((await createWorkspace(b.http, 'by-team-b')).status).toBe(201);
    await sql(`update teams set manage_workspaces = false where id = ?`, [f.teamId]);
    await eventually(async () => {
      const refused = [(await createWorkspace(h.http, 'refused-a')).status, (await createWorkspace(b.http, 'refused-b')).status];
      return refused.every((code) => code !== 201) ? refused : undefined;
    }, 5_000);
  });

  it('forgets everything when its LISTEN connection is lost, and listens again', async () => {
    const token = await unannouncedTokenKnownToBoth();
    // Unheard: only forgetting on the lost connection can make the processes ask again.
    await revokeUnheard(token);
    const before = await listenerPids();
    expect(before).toHaveLength(2);
    for (const pid of before) await sql(`select pg_terminate_backend(?)`, [pid]);
    // Both listen again on new connections; what they knew before the gap is gone.
    await eventually(async () => {
      const now = await listenerPids();
      return now.length === 2 && now.every((pid) => !before.includes(pid)) ? true : undefined;
    }, 15_000);
    expect([await status(h.http, token), await status(b.http, token)]).toEqual([401, 401]);
    // And they remember again: a fresh token is looked up once, then served from memory.
    const fresh = await unannouncedTokenKnownToBoth();
    await revokeUnheard(fresh);
    await sql(`select pg_notify(?, '')`, [PRINCIPALS_CHANNEL]);
    await refusedByBoth(fresh);
  });

  it('trusts its connection only while it hears its heartbeat, and forgets what it knew across a gap', async () => {
    // As behind a pooler that never delivers, or on a connection dead without a word: no heartbeat comes back.
    let beating = true;
    const pool = await nativePool(h.orm.em);
    const cache = new PrincipalCache({
      databaseUrl: h.config.databaseUrl,
      ttlMs: 3_600_000,
      logger: h.logger,
      heartbeatMs: 50,
      notify: async (payload) => {
        if (beating) await pool.query('select pg_notify($1, $2)', [PRINCIPALS_CHANNEL, payload]);
      },
    });
    const known = { principal: { kind: 'admin' as const, tokenId: 'token-x' }, tokenId: 'token-x', expiresAt: null, lastUsedAt: null };
    await cache.start();
    try {
      await eventually(async () => cache.trusted || undefined);
      cache.remember('hash-x', known, cache.epoch);
      expect(cache.recall('hash-x')?.tokenId).toBe('token-x');
      beating = false;
      await eventually(async () => !cache.trusted || undefined);
      expect(cache.recall('hash-x')).toBeUndefined();
      cache.remember('hash-y', known, cache.epoch);
      beating = true;
      await eventually(async () => cache.trusted || undefined);
      expect([cache.recall('hash-x'), cache.recall('hash-y'), cache.size]).toEqual([undefined, undefined, 0]);
    } finally {
      await cache.stop();
    }
  });

  it('never remembers a token the database refused', async () => {
    const size = cacheB().size;
    for (let index = 0; index < 5; index += 1) expect(await status(b.http, `rtk_${'x'.repeat(42)}${index}`)).toBe(401);
    expect(cacheB().size).toBe(size);
  });
});

describe('principal notifications: which changes tell the API processes to forget', () => {
  let h: Harness;
  let listener: pg.Client;
  const heard: string[] = [];

  beforeAll(async () => {
    h = await startHarness();
    listener = new pg.Client({ connectionString: h.config.databaseUrl });
    await listener.connect();
    listener.on('notification', (message) => heard.push(message.payload ?? ''));
    await listener.query(`listen ${PRINCIPALS_CHANNEL}`);
  });

  afterAll(async () => {
    await listener?.end();
    await h?.close();
  });

  /** Notifies a marker and waits until it is heard: everything committed before it has been heard too (delivery keeps commit order). */
  async function heardUpTo(): Promise<number> {
    const marker = `marker-${Math.random()}`;
    await h.orm.em.fork().getConnection().execute(`select pg_notify(?, ?)`, [PRINCIPALS_CHANNEL, marker]);
    await eventually(async () => (heard.includes(marker) ? true : undefined), 5_000);
    return heard.indexOf(marker);
  }

  /** How many notifications `statement` sent, between two markers. */
  async function notificationsOf(statement: string): Promise<number> {
    const start = await heardUpTo();
    await h.orm.em.fork().getConnection().execute(statement);
    return (await heardUpTo()) - start - 1;
  }

  it.each([
    ['a use recorded (last_used_at)', 0, `update api_tokens set last_used_at = now()`],
    ['a description changed', 0, `update api_tokens set description = 'renamed'`],
    ['a token revoked', 1, `update api_tokens set revoked_at = now() where kind = 'organization'`],
    ['an expiry set', 1, `update api_tokens set expires_at = now() + interval '1 day' where kind = 'admin'`],
    ['a team renamed', 0, `update teams set name = name || '-renamed'`],
    ["a team's permission changed", 1, `update teams set manage_run_tasks = not manage_run_tasks`],
    ['a team deleted', 1, `delete from teams`],
    ['a token deleted', 1, `delete from api_tokens where kind = 'organization'`],
    ['an organization deleted (its tokens and teams cascade)', 1, `delete from organizations`],
    // Cascading to the run pages' sessions, which belong to their tokens.
    ['the tokens table truncated', 1, `truncate api_tokens cascade`],
  ])('%s: %i notification(s)', async (_, expected, statement) => {
    // Rows for every statement to act on: a fresh organization, token and team each time.
    await seedOrganization(h, `notify-${Math.random().toString(36).slice(2, 8)}`);
    expect(await notificationsOf(statement)).toBe(expected);
  });

  it('a new token tells them only to forget the tokens they refused (it may be one of them; no principal changed)', async () => {
    const start = await heardUpTo();
    await h.orm.em
      .fork()
      .getConnection()
      .execute(`insert into api_tokens (id, kind, token_hash, created_at) values ('token-notify-new', 'admin', repeat('a', 64), now())`);
    const end = await heardUpTo();
    expect(heard.slice(start + 1, end)).toEqual([TOKEN_CREATED]);
  });
});
