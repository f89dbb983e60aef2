import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { DB_NOW_ISO, nativePool } from '@runtasks/shared/db';
import { objectStoreFor, removeExpiredObjects } from '@runtasks/shared/storage';
import { uniqueName } from '../../../test/support/assertions.ts';
import { api, createRun, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { CHANGING_PLAN } from '../../../test/support/plan-documents.ts';
import { STORAGE_BACKENDS, startStorageBackend, type StorageBackend } from '../../../test/support/storage-backends.ts';
import { getRaw, sendChunked, type RawResponse } from '../../../test/support/streaming.ts';

/**
 * A reported plan JSON is stored as the bytes reported, streamed (never held while it arrives), hashed on
 * the way (the one SHA-256 a repeat is compared by), and served as those bytes with that SHA-256 as ETag;
 * through either backend (STORAGE_BACKEND=postgres, and s3 against a local S3-compatible server).
 */

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
const errorOf = (res: RawResponse) => (JSON.parse(res.body.toString('utf8')) as { errors: Record<string, unknown>[] }).errors[0];
const LIMIT = 2 * 1024 * 1024;

/** A plan of about `bytes`, indented by three spaces and with its keys in an unusual order: a re-serialization would differ. */
function oddlyFormattedPlan(bytes: number): Buffer {
  const { resource_changes: changes, ...rest } = CHANGING_PLAN;
  const text = JSON.stringify({ padding: 'é'.repeat(Math.floor(bytes / 2)), resource_changes: changes, ...rest }, null, 3);
  return Buffer.from(`${text}\n`, 'utf8');
}

describe.each(STORAGE_BACKENDS)('reported plans stream through storage (STORAGE_BACKEND=%s)', (backendName) => {
  let backend: StorageBackend;
  let h: Harness;
  let f: Fixture;
  let workspaceId: string;

  beforeAll(async () => {
    backend = await startStorageBackend(backendName);
    h = await startHarness({ env: { ...backend.env, PLAN_JSON_MAX_BYTES: String(LIMIT) } });
    f = await seedOrganization(h, uniqueName('plans'));
    const created = await api(h, 'post', `/organizations/${f.organization}/workspaces`, f.organizationToken, {
      data: { type: 'workspaces', attributes: { name: 'pipeline', 'execution-mode': 'local' } },
    });
    workspaceId = created.body.data.id as string;
  });
  afterAll(async () => {
    await h?.close();
    await backend?.close();
  });

  /** A local run at planning, as the worker leaves it for its pipeline. */
  async function planningRun(): Promise<string> {
    const runId = await createRun(h, f.organizationToken, workspaceId);
    await (
      await nativePool(h.orm.em)
    ).query(
      `update runs set status = 'planning', status_timestamps = status_timestamps || jsonb_build_object('planning-at', ${DB_NOW_ISO}), version = version + 1 where id = $1`,
      [runId],
    );
    return runId;
  }
  const report = (runId: string, body: Buffer) =>
    sendChunked(`${h.baseUrl}/api/v2/runs/${runId}/plan/json-output`, 'PUT', body, {
      headers: { Authorization: `Bearer ${f.organizationToken}`, 'Content-Type': 'application/json' },
    });
  const fetchPlan = (runId: string, headers: Record<string, string> = {}) =>
    getRaw(`${h.baseUrl}/api/v2/runs/${runId}/plan/json-output`, { Authorization: `Bearer ${f.organizationToken}`, ...headers });
  const planObjects = async (): Promise<number> => {
    const [row] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ n: string }[]>(`select count(*) as n from stored_objects where workspace_id = ? and kind = 'plan-json'`, [workspaceId]);
    return Number(row?.n);
  };

  it('serves the plan as the bytes reported, with their SHA-256 as ETag (the plan-json-sha256 too), compressed or not', async () => {
    const runId = await planningRun();
    const plan = oddlyFormattedPlan(1_200_000);
    const taken = await report(runId, plan);
    expect(taken.status).toBe(200);
    const attributes = (JSON.parse(taken.body.toString('utf8')) as { data: { attributes: Record<string, unknown> } }).data.attributes;
    expect(attributes).toMatchObject({ status: 'finished', 'plan-json-sha256': sha256(plan), 'resource-additions': 2 });
    const plain = await fetchPlan(runId);
    expect([plain.status, plain.headers['content-type'], plain.headers['etag']]).toEqual([
      200,
      'application/json; charset=utf-8',
      `"${sha256(plan)}"`,
    ]);
    expect(plain.body.equals(plan)).toBe(true);
    const gzipped = await fetchPlan(runId, { 'Accept-Encoding': 'gzip' });
    expect([gzipped.headers['content-encoding'], gzipped.headers['etag']]).toEqual(['gzip', `"${sha256(plan)}"`]);
    expect(gunzipSync(gzipped.body).equals(plan)).toBe(true);
    const cached = await fetchPlan(runId, { 'If-None-Match': `"${sha256(plan)}"` });
    expect([cached.status, cached.body.length]).toEqual([304, 0]);
  });

  it('answers the same plan again as a repeat and another as a 409, storing nothing more for either', async () => {
    const runId = await planningRun();
    const plan = oddlyFormattedPlan(400_000);
    expect((await report(runId, plan)).status).toBe(200);
    const stored = await planObjects();
    const heldBefore = await backend.held(h, f.organization);
    const repeat = await report(runId, plan);
    expect([repeat.status, repeat.headers['idempotent-replayed']]).toEqual([200, 'true']);
    const other = await report(runId, oddlyFormattedPlan(300_000));
    expect([other.status, errorOf(other)?.['title']]).toEqual([409, 'conflicting report']);
    expect(await planObjects()).toBe(stored);
    expect(await backend.held(h, f.organization)).toBe(heldBefore);
    expect((await fetchPlan(runId)).body.equals(plan)).toBe(true);
  });

  it('refuses a plan past PLAN_JSON_MAX_BYTES mid-stream (413) and one that is no JSON (400), storing nothing, and the run still waits', async () => {
    const runId = await planningRun();
    const stored = await planObjects();
    const heldBefore = await backend.held(h, f.organization);
    const tooLarge = await report(runId, oddlyFormattedPlan(LIMIT + 100_000));
    expect([tooLarge.status, errorOf(tooLarge)?.['title']]).toEqual([413, 'payload too large']);
    expect(String(errorOf(tooLarge)?.['detail'])).toContain('PLAN_JSON_MAX_BYTES');
    const notJson = await report(runId, Buffer.from('{"format_version": '.padEnd(500_000, ' ')));
    expect([notJson.status, errorOf(notJson)?.['title']]).toEqual([400, 'malformed JSON']);
    expect(await planObjects()).toBe(stored);
    expect(await backend.held(h, f.organization)).toBe(heldBefore);
    const plan = oddlyFormattedPlan(100_000);
    expect((await report(runId, plan)).status).toBe(200);
    expect((await fetchPlan(runId)).body.equals(plan)).toBe(true);
  });

  it("retention removes a finished run's plan once older than its age, and the API answers 410 for it, not a 500", async () => {
    const runId = await planningRun();
    const heldBefore = await backend.held(h, f.organization);
    expect((await report(runId, oddlyFormattedPlan(50_000))).status).toBe(200);
    expect(await backend.held(h, f.organization)).toBe(heldBefore + 1);
    const pool = await nativePool(h.orm.em);
    const store = objectStoreFor(pool, h.config.storage);
    // Not finished yet: kept, however old.
    await pool.query(`update stored_objects set created_at = now() - interval '2 days' where workspace_id = $1`, [workspaceId]);
    await removeExpiredObjects(pool, store, 86_400_000);
    expect((await fetchPlan(runId)).status).toBe(200);
    await pool.query(`update runs set status = 'planned_and_finished' where id = $1`, [runId]);
    // Without retention (0), kept; with one day, removed.
    await removeExpiredObjects(pool, store, 0);
    expect((await fetchPlan(runId)).status).toBe(200);
    expect(await removeExpiredObjects(pool, store, 86_400_000)).toBeGreaterThan(0);
    // The bytes are gone from the backend too, not only the row.
    expect(await backend.held(h, f.organization)).toBe(heldBefore);
    const gone = await fetchPlan(runId);
    expect(gone.status).toBe(410);
    expect(gone.headers['content-type']).toContain('application/vnd.api+json');
    expect(errorOf(gone)).toMatchObject({ status: '410', title: 'gone' });
    expect(String(errorOf(gone)?.['detail'])).toContain('STORAGE_RETENTION_DAYS');
  });
});
