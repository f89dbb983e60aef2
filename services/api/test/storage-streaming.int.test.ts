import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uniqueName } from '../../../test/support/assertions.ts';
import { api, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { STORAGE_BACKENDS, startStorageBackend, type StorageBackend } from '../../../test/support/storage-backends.ts';
import { getRaw, largeArchive, sendChunked, type RawResponse } from '../../../test/support/streaming.ts';

/**
 * Archives stream into storage and out of it (shared/src/storage): never held whole, the size limit and
 * the organization's quota enforced as bytes arrive, served byte for byte with their SHA-256 as ETag.
 */

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
const errorOf = (res: RawResponse) => (JSON.parse(res.body.toString('utf8')) as { errors: Record<string, unknown>[] }).errors[0];

async function newVersion(h: Harness, f: Fixture): Promise<{ id: string; uploadPath: string }> {
  const res = await api(h, 'post', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken, {
    data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false } },
  });
  expect(res.status).toBe(201);
  return { id: res.body.data.id, uploadPath: new URL(String(res.body.data.attributes['upload-url'])).pathname };
}

const upload = (h: Harness, path: string, body: Buffer, options: Parameters<typeof sendChunked>[3] = {}) =>
  sendChunked(`${h.baseUrl}${path}`, 'PUT', body, { headers: { 'Content-Type': 'application/octet-stream' }, ...options });

let backend: StorageBackend;

/** The organization's stored objects (rows of stored_objects), and the pieces the backend holds for them. */
async function storedRows(h: Harness, organization: string): Promise<{ objects: number; pieces: number }> {
  const [row] = await h.orm.em
    .fork()
    .getConnection()
    .execute<{ objects: string }[]>(
      `select count(*) as objects from stored_objects o join organizations g on g.id = o.organization_id where g.name = ?`,
      [organization],
    );
  return { objects: Number(row?.objects), pieces: await backend.held(h, organization) };
}

describe.each(STORAGE_BACKENDS)('with STORAGE_BACKEND=%s', (backendName) => {
  beforeAll(async () => {
    backend = await startStorageBackend(backendName);
  });
  afterAll(async () => {
    await backend?.close();
  });

  describe('archives stream through storage', () => {
    let h: Harness;
    let f: Fixture;
    const archive = largeArchive(1_200_000);

    beforeAll(async () => {
      // With ops: /metrics, and the default rate limit.
      h = await startHarness({ ops: true, env: { ...backend.env, CONFIGURATION_VERSION_MAX_BYTES: String(archive.length + 1000) } });
      f = await seedOrganization(h, uniqueName('stream'));
    });
    afterAll(async () => {
      await h?.close();
    });

    const download = (id: string, headers: Record<string, string> = {}) =>
      getRaw(`${h.baseUrl}/api/v2/configuration-versions/${id}/download`, { Authorization: `Bearer ${f.organizationToken}`, ...headers });

    it('takes a chunked upload of many parts and serves it byte for byte, with its SHA-256 as ETag and 304 for it', async () => {
      const version = await newVersion(h, f);
      expect((await upload(h, version.uploadPath, archive)).status).toBe(200);
      // PostgreSQL: a chunk a row (256 KiB each), not one value; S3: one object.
      expect(await storedRows(h, f.organization)).toEqual({ objects: 1, pieces: backend.piecesOf(archive.length) });
      const res = await download(version.id);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/octet-stream');
      expect(res.headers['content-length']).toBe(String(archive.length));
      expect(res.headers['etag']).toBe(`"${sha256(archive)}"`);
      expect(res.body.equals(archive)).toBe(true);
      const again = await download(version.id, { 'If-None-Match': `"${sha256(archive)}"` });
      expect([again.status, again.body.length]).toEqual([304, 0]);
      expect((await download(version.id, { 'If-None-Match': '"other"' })).status).toBe(200);
    });

    it('replaces the archive on a second upload to the same URL and keeps only the new one', async () => {
      const version = await newVersion(h, f);
      const before = await storedRows(h, f.organization);
      expect((await upload(h, version.uploadPath, archive)).status).toBe(200);
      const smaller = largeArchive(300_000);
      expect((await upload(h, version.uploadPath, smaller)).status).toBe(200);
      expect(await storedRows(h, f.organization)).toEqual({
        objects: before.objects + 1,
        pieces: before.pieces + backend.piecesOf(smaller.length),
      });
      expect((await download(version.id)).body.equals(smaller)).toBe(true);
    });

    it('refuses a body past the limit at the byte that passes it (413, JSON:API), stores nothing, and the URL stays usable', async () => {
      const version = await newVersion(h, f);
      const before = await storedRows(h, f.organization);
      const tooLarge = Buffer.concat([archive, Buffer.alloc(4096, 1)]);
      const res = await upload(h, version.uploadPath, tooLarge);
      expect(res.status).toBe(413);
      expect(errorOf(res)).toMatchObject({ status: '413', title: 'payload too large', meta: { 'limit-bytes': archive.length + 1000 } });
      expect(String(errorOf(res)?.['detail'])).toContain('CONFIGURATION_VERSION_MAX_BYTES');
      expect(await storedRows(h, f.organization)).toEqual(before);
      const shown = await api(h, 'get', `/configuration-versions/${version.id}`, f.organizationToken);
      expect(shown.body.data.attributes.status).toBe('pending');
      expect((await upload(h, version.uploadPath, archive)).status).toBe(200);
    });

    it('refuses a body that is not gzip at its first bytes (422) and stores nothing', async () => {
      const version = await newVersion(h, f);
      const before = await storedRows(h, f.organization);
      const res = await upload(h, version.uploadPath, Buffer.alloc(600_000, 0x41));
      expect([res.status, errorOf(res)?.['title']]).toEqual([422, 'invalid archive']);
      expect(await storedRows(h, f.organization)).toEqual(before);
    });

    it('is ready with its store: the bucket answers where STORAGE_BACKEND=s3', async () => {
      const ready = await h.http.get('/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body.components.storage).toEqual(
        backendName === 's3' ? { ok: true, backend: 's3', bucket: backend.env['S3_BUCKET'] } : undefined,
      );
    });

    it('reports what is stored by kind in storage_bytes and storage_objects', async () => {
      const version = await newVersion(h, f);
      expect((await upload(h, version.uploadPath, archive)).status).toBe(200);
      const [row] = await h.orm.em
        .fork()
        .getConnection()
        .execute<{ bytes: string; objects: string }[]>(
          `select sum(size)::text as bytes, count(*)::text as objects from stored_objects where kind = 'configuration-archive'`,
        );
      expect(Number(row?.bytes)).toBeGreaterThanOrEqual(archive.length);
      const text = (await h.http.get('/metrics')).text;
      expect(text).toMatch(/^# TYPE storage_bytes gauge$/m);
      expect(text).toContain(`\nstorage_bytes{kind="configuration-archive"} ${Number(row?.bytes)}\n`);
      expect(text).toContain(`\nstorage_objects{kind="configuration-archive"} ${Number(row?.objects)}\n`);
      // A kind with nothing stored reads 0 rather than disappearing.
      expect(text).toContain('\nstorage_bytes{kind="plan-json"} 0\n');
    });
  });

  describe("an organization's storage quota", () => {
    let h: Harness;
    let f: Fixture;
    const archive = largeArchive(400_000);

    beforeAll(async () => {
      h = await startHarness({ env: { ...backend.env, STORAGE_QUOTA_BYTES: String(Math.floor(archive.length * 1.5)) } });
      f = await seedOrganization(h, uniqueName('quota'));
    });
    afterAll(async () => {
      await h?.close();
    });

    it('refuses an upload past the quota with a 413 naming it, stores nothing of it, and other organizations are not affected', async () => {
      expect((await upload(h, (await newVersion(h, f)).uploadPath, archive)).status).toBe(200);
      const second = await newVersion(h, f);
      const res = await upload(h, second.uploadPath, archive);
      expect(res.status).toBe(413);
      expect(errorOf(res)).toMatchObject({
        status: '413',
        title: 'storage quota exceeded',
        meta: { 'quota-bytes': Math.floor(archive.length * 1.5), 'used-bytes': archive.length },
      });
      expect(String(errorOf(res)?.['detail'])).toContain('STORAGE_QUOTA_BYTES');
      expect(await storedRows(h, f.organization)).toEqual({ objects: 1, pieces: backend.piecesOf(archive.length) });
      // Announced up front: refused before a byte is stored.
      const announced = await h.http.put(second.uploadPath).set('Content-Type', 'application/octet-stream').send(archive);
      expect([announced.status, announced.body.errors[0].title]).toEqual([413, 'storage quota exceeded']);
      const other = await seedOrganization(h, uniqueName('quota-other'));
      expect((await upload(h, (await newVersion(h, other)).uploadPath, archive)).status).toBe(200);
    });
  });

  describe('the upload rate rule (instead of a fixed request timeout)', () => {
    let h: Harness;
    let f: Fixture;
    const archive = largeArchive(200_000);

    beforeAll(async () => {
      h = await startHarness({ env: { ...backend.env, UPLOAD_MIN_BYTES_PER_SECOND: '4096', UPLOAD_RATE_WINDOW_SECONDS: '1' } });
      f = await seedOrganization(h, uniqueName('rate'));
    });
    afterAll(async () => {
      await h?.close();
    });

    it('cuts an upload that stops sending with a 408 and keeps nothing of it', async () => {
      const version = await newVersion(h, f);
      const res = await upload(h, version.uploadPath, archive, { stallAfter: 100_000 });
      expect([res.status, errorOf(res)?.['title']]).toEqual([408, 'request timeout']);
      expect(String(errorOf(res)?.['detail'])).toContain('UPLOAD_MIN_BYTES_PER_SECOND');
      await eventually(async () => {
        const stored = await storedRows(h, f.organization);
        return stored.objects === 0 && stored.pieces === 0 ? true : undefined;
      });
      const shown = await api(h, 'get', `/configuration-versions/${version.id}`, f.organizationToken);
      expect(shown.body.data.attributes.status).toBe('pending');
    });

    it('lets a slow but steady upload take as many windows as it needs', async () => {
      const version = await newVersion(h, f);
      // 16 KiB every 250 ms (64 KiB/s, well above 4 KiB/s): about three windows for the whole archive.
      const res = await upload(h, version.uploadPath, archive, { partBytes: 16 * 1024, paceMs: 250 });
      expect(res.status).toBe(200);
      expect(await storedRows(h, f.organization)).toEqual({ objects: 1, pieces: backend.piecesOf(archive.length) });
    });
  });
});

describe('an archive of several S3 parts (STORAGE_BACKEND=s3)', () => {
  let h: Harness;
  let f: Fixture;
  // Over two parts of 5 MiB: a multipart upload of three.
  const archive = largeArchive(11 * 1024 * 1024);

  beforeAll(async () => {
    backend = await startStorageBackend('s3');
    h = await startHarness({ env: { ...backend.env, CONFIGURATION_VERSION_MAX_BYTES: String(archive.length + 1000) } });
    f = await seedOrganization(h, uniqueName('multipart'));
  });
  afterAll(async () => {
    await h?.close();
    await backend?.close();
  });

  it('goes up as one object of every byte and comes back byte for byte', async () => {
    const version = await newVersion(h, f);
    expect((await upload(h, version.uploadPath, archive)).status).toBe(200);
    const [row] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ archive_key: string }[]>(`select archive_key from configuration_versions where id = ?`, [version.id]);
    expect(await backend.objectSize?.(String(row?.archive_key))).toBe(archive.length);
    const res = await getRaw(`${h.baseUrl}/api/v2/configuration-versions/${version.id}/download`, {
      Authorization: `Bearer ${f.organizationToken}`,
    });
    expect([res.status, res.headers['etag']]).toEqual([200, `"${sha256(archive)}"`]);
    expect(res.body.equals(archive)).toBe(true);
  });

  it('refuses a body past the limit after parts went up, and leaves nothing in the bucket', async () => {
    const version = await newVersion(h, f);
    const before = await storedRows(h, f.organization);
    const res = await upload(h, version.uploadPath, Buffer.concat([archive, Buffer.alloc(64 * 1024, 1)]));
    expect([res.status, errorOf(res)?.['title']]).toEqual([413, 'payload too large']);
    expect(await storedRows(h, f.organization)).toEqual(before);
  });
});

describe("the S3 backend's spool files (STORAGE_BACKEND=s3, STORAGE_SPOOL_DIR)", () => {
  let h: Harness;
  let f: Fixture;
  let spoolDir: string;
  // Over two parts of 5 MiB, so that parts went up from the spool before the end.
  const archive = largeArchive(11 * 1024 * 1024);
  const spooled = (): string[] => readdirSync(spoolDir);

  beforeAll(async () => {
    backend = await startStorageBackend('s3');
    spoolDir = mkdtempSync(join(tmpdir(), 'runtasks-spool-test-'));
    h = await startHarness({
      env: {
        ...backend.env,
        STORAGE_SPOOL_DIR: spoolDir,
        CONFIGURATION_VERSION_MAX_BYTES: String(archive.length + 1000),
        UPLOAD_MIN_BYTES_PER_SECOND: '4096',
        UPLOAD_RATE_WINDOW_SECONDS: '1',
      },
    });
    f = await seedOrganization(h, uniqueName('spool'));
  });
  afterAll(async () => {
    await h?.close();
    await backend?.close();
    if (spoolDir) rmSync(spoolDir, { recursive: true, force: true });
  });

  it("keeps a stalled upload's unsent part in a file of its own (0600), and removes it once the upload is cut", async () => {
    const version = await newVersion(h, f);
    // A part went up, and 1 MiB of the next waits in the spool when the client stops sending.
    const answered = upload(h, version.uploadPath, archive, { stallAfter: 6 * 1024 * 1024 });
    const [file] = await eventually(async () => (spooled().length === 1 ? spooled() : undefined));
    expect(file).toMatch(/^runtasks-spool-/);
    expect(statSync(join(spoolDir, String(file))).mode & 0o777).toBe(0o600);
    const res = await answered;
    expect([res.status, errorOf(res)?.['title']]).toEqual([408, 'request timeout']);
    // The spool file goes first, then what the object had in the bucket and its row.
    await eventually(async () => {
      const stored = await storedRows(h, f.organization);
      return spooled().length === 0 && stored.objects === 0 && stored.pieces === 0 ? true : undefined;
    });
  });

  it('leaves no spool file after uploads that succeed or fail, small or of several parts', async () => {
    const statuses: number[] = [];
    for (const body of [archive, largeArchive(100_000), Buffer.concat([archive, Buffer.alloc(64 * 1024, 1)]), Buffer.alloc(1000, 7)]) {
      statuses.push((await upload(h, (await newVersion(h, f)).uploadPath, body)).status);
    }
    expect(statuses).toEqual([200, 200, 413, 422]);
    await eventually(async () => (spooled().length === 0 ? true : undefined));
    expect(await storedRows(h, f.organization)).toEqual({ objects: 2, pieces: 2 });
  });
});

describe('a bucket that does not answer (STORAGE_BACKEND=s3)', () => {
  let h: Harness;

  beforeAll(async () => {
    backend = await startStorageBackend('s3');
    h = await startHarness({ ops: true, env: { ...backend.env, S3_BUCKET: 'runtasks-no-such-bucket' } });
  });
  afterAll(async () => {
    await h?.close();
    await backend?.close();
  });

  it('makes the process not ready, naming the store', async () => {
    const ready = await h.http.get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.components.storage).toMatchObject({ ok: false });
    expect(ready.body.components.postgres).toMatchObject({ ok: true });
  });
});
