import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg, { type Pool } from 'pg';
import {
  GENERIC_INDEX_OPTIONS,
  genericIndexPool,
  genericIndexPoolOrBase,
  nativePool,
  refusedStartupOptions,
  withGenericIndexOptions,
} from '../src/db/prepared.ts';
import { startHarness, type Harness } from '../../test/support/harness.ts';
import { startStandInPooler } from '../../test/support/stand-in-pooler.ts';

describe("the advances' pool settings", () => {
  it('adds its options to those a URL, the configuration or PGOPTIONS already give, and to nothing else', () => {
    const options = (url: string): string | null => new URL(url).searchParams.get('options');
    expect(options(withGenericIndexOptions({ connectionString: 'postgres://u@db:5432/app?sslmode=require' }).connectionString ?? '')).toBe(
      GENERIC_INDEX_OPTIONS,
    );
    const merged = withGenericIndexOptions({
      connectionString: 'postgres://u@db/app?options=-c%20statement_timeout%3D5000&application_name=x',
    });
    expect(options(merged.connectionString ?? '')).toBe(`-c statement_timeout=5000 ${GENERIC_INDEX_OPTIONS}`);
    expect(new URL(merged.connectionString ?? '').searchParams.get('application_name')).toBe('x');
    expect(withGenericIndexOptions({ host: 'db', options: '-c work_mem=8MB' }).options).toBe(`-c work_mem=8MB ${GENERIC_INDEX_OPTIONS}`);
    expect(withGenericIndexOptions({ host: 'db' }, { PGOPTIONS: '-c search_path=app' }).options).toBe(
      `-c search_path=app ${GENERIC_INDEX_OPTIONS}`,
    );
    expect(withGenericIndexOptions({ host: 'db' }, {}).options).toBe(GENERIC_INDEX_OPTIONS);
  });

  it('tells a refusal of startup settings from other connection errors', () => {
    expect(
      refusedStartupOptions(Object.assign(new Error('unsupported startup parameter in options: enable_seqscan'), { code: '08P01' })),
    ).toBe(true);
    expect(refusedStartupOptions(new Error('unsupported startup parameter: options'))).toBe(true);
    expect(refusedStartupOptions(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }))).toBe(false);
    expect(refusedStartupOptions(Object.assign(new Error('password authentication failed'), { code: '28P01' }))).toBe(false);
    expect(refusedStartupOptions(undefined)).toBe(false);
  });
});

describe("the advances' pool, on real connections", () => {
  let h: Harness;
  let base: Pool;
  beforeAll(async () => {
    h = await startHarness();
    base = await nativePool(h.orm.em.fork());
  });
  afterAll(async () => {
    await h.close();
  });

  it('runs its sessions with generic plans and without seq scans, and leaves the main pool as it was', async () => {
    const pool = genericIndexPool(base, 1);
    try {
      const setting = async (target: Pool, name: string): Promise<string> =>
        (await target.query<Record<string, string>>(`show ${name}`)).rows[0]?.[name] ?? '';
      expect(await setting(pool, 'plan_cache_mode')).toBe('force_generic_plan');
      expect(await setting(pool, 'enable_seqscan')).toBe('off');
      // Its own connections, under the same name as the process's others.
      const { rows } = await pool.query<{ name: string }>(
        'select application_name as name from pg_stat_activity where pid = pg_backend_pid()',
      );
      expect(rows[0]?.name).toBe(
        (await base.query<{ name: string }>('select current_setting($1) as name', ['application_name'])).rows[0]?.name,
      );
      expect(await setting(base, 'plan_cache_mode')).toBe('auto');
      expect(await setting(base, 'enable_seqscan')).toBe('on');
    } finally {
      await pool.end();
    }
  });

  it('keeps a URL’s own options beside its settings', async () => {
    const url = new URL(h.config.databaseUrl);
    url.searchParams.set('options', '-c statement_timeout=4321');
    const own = new pg.Pool({ connectionString: url.toString(), max: 1 });
    const pool = genericIndexPool(own, 1);
    try {
      const { rows } = await pool.query<{ timeout: string; mode: string }>(
        `select current_setting('statement_timeout') as timeout, current_setting('plan_cache_mode') as mode`,
      );
      expect(rows[0]).toEqual({ timeout: '4321ms', mode: 'force_generic_plan' });
    } finally {
      await pool.end();
      await own.end();
    }
  });

  it('is used where the server takes its settings, and where the server is only down for now', async () => {
    const refusals: unknown[] = [];
    const taken = await genericIndexPoolOrBase(base, 1, (error) => refusals.push(error));
    try {
      expect(taken.pool).not.toBe(base);
      // Its trial connection is closed: nothing held until an advance needs it.
      expect(taken.pool.totalCount).toBe(0);
      expect((await taken.pool.query<{ mode: string }>(`select current_setting('plan_cache_mode') as mode`)).rows[0]?.mode).toBe(
        'force_generic_plan',
      );
    } finally {
      await taken.end();
    }
    // Nothing listens on this port: down, not refusing.
    const down = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:9/none', max: 1, connectionTimeoutMillis: 2000 });
    const waiting = await genericIndexPoolOrBase(down, 1, (error) => refusals.push(error));
    expect(waiting.pool).not.toBe(down);
    await waiting.end();
    await down.end();
    expect(refusals).toEqual([]);
  });

  it('gives way to the main pool where a pooler refuses its settings, and says so', async () => {
    // A pooler with no server behind it: it refuses every startup.
    const pooler = await startStandInPooler({ refuses: () => true });
    const refused = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${pooler.port}/app`, max: 1 });
    try {
      const refusals: unknown[] = [];
      const chosen = await genericIndexPoolOrBase(refused, 1, (error) => refusals.push(error));
      expect(chosen.pool).toBe(refused);
      expect([pooler.startups, pooler.refused]).toEqual([1, 1]);
      expect(refusals).toHaveLength(1);
      expect(refusals[0]).toMatchObject({ code: '08P01' });
      await chosen.end();
    } finally {
      await refused.end();
      await pooler.close();
    }
  });
});
