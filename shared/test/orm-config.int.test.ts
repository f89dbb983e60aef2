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

  it('passes the ssl parameters: sslmode=require fails against a server without TLS instead of connecting in the clear', async () => {
    const { rows } = await (await nativePool(h.orm.em)).query<{ ssl: string }>(`select current_setting('ssl') as ssl`);
    const url = new URL(h.config.databaseUrl);
    url.searchParams.set('sslmode', 'require');
    const strict = await openOrm(url.toString(), 1);
    try {
      const attempt = nativePool(strict.em).then((pool) => pool.query('select 1'));
      // A server with TLS on would take it; this machine's does not, and then the pool must refuse.
      if (rows[0]?.ssl === 'on') await expect(attempt).resolves.toBeDefined();
      else await expect(attempt).rejects.toThrow(/SSL/i);
    } finally {
      await strict.close();
    }
  });
});
