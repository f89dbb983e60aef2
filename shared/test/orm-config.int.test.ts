import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '../src/db/bootstrap.ts';
import { nativePool } from '../src/db/prepared.ts';
import { startHarness, type Harness } from '../../test/support/harness.ts';

/**
 * MikroORM hands pg only the host, port, user, password and database of the URL; a user's
 * `sslmode=require` or `options` would silently not reach the pool. The whole URL does.
 */
describe("the pool's connections take DATABASE_URL's parameters", () => {
  let h: Harness;
  let orm: MikroORM;
  beforeAll(async () => {
    h = await startHarness();
    const url = new URL(h.config.databaseUrl);
    url.searchParams.set('options', '-c statement_timeout=4321');
    url.searchParams.set('application_name', 'url-check');
    orm = await openOrm(url.toString(), 1);
  });
  afterAll(async () => {
    await orm?.close();
    await h?.close();
  });

  it('passes options and application_name to every connection of the pool', async () => {
    const { rows } = await (
      await nativePool(orm.em)
    ).query<{ timeout: string; name: string }>(
      `select current_setting('statement_timeout') as timeout, current_setting('application_name') as name`,
    );
    expect(rows[0]).toEqual({ timeout: '4321ms', name: 'url-check' });
  });

  it('passes the ssl parameters: with sslmode set, the pool is encrypted or refused, never in the clear', async () => {
    const { rows } = await (await nativePool(h.orm.em)).query<{ ssl: string }>(`select current_setting('ssl') as ssl`);
    const url = new URL(h.config.databaseUrl);
    // no-verify: TLS without checking the certificate, so a server with a self-signed one takes it too.
    url.searchParams.set('sslmode', 'no-verify');
    const strict = await openOrm(url.toString(), 1);
    try {
      const encrypted = nativePool(strict.em)
        .then((pool) => pool.query<{ ssl: boolean }>('select ssl from pg_stat_ssl where pid = pg_backend_pid()'))
        .then((result) => result.rows[0]?.ssl);
      // This machine's server has no TLS: the pool must refuse rather than connect in the clear.
      if (rows[0]?.ssl === 'on') await expect(encrypted).resolves.toBe(true);
      else await expect(encrypted).rejects.toThrow(/SSL/i);
    } finally {
      await strict.close();
    }
  });
});
