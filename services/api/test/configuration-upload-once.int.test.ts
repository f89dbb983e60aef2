import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import { configurationArchive } from '../../../test/support/archives.ts';
import { api, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Exactly one run per auto-queue upload URL, however many uploads arrive at once (docs/limits-and-security.md,
 * "One run per upload"), with the service's default settings (rate limiting on). Each upload is a real PUT
 * over its own connection; the runs are counted in the database.
 */
describe.each([
  { settings: 'default settings (rate limiting on)', env: {} as Record<string, string>, trials: [8, 8, 8] },
  // Without the rate limiter all 32 reach the database at once: the race itself, at its widest.
  { settings: 'no rate limit', env: { RATE_LIMIT_PER_SECOND: '0' }, trials: [32, 32, 8] },
])('concurrent uploads to one auto-queue upload URL, $settings', ({ env, trials }) => {
  let h: Harness;
  let f: Fixture;
  const archive = configurationArchive();
  const other = configurationArchive('# another configuration\n');

  beforeAll(async () => {
    h = await startHarness({ ops: true, reachableBaseUrl: true, env });
    f = await seedOrganization(h, `upload-once-${Object.keys(env).length}`);
  });
  afterAll(async () => {
    await h?.close();
  });

  async function newVersion(attributes: Record<string, unknown> = {}): Promise<{ id: string; url: string }> {
    const created = await api(h, 'post', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken, {
      data: { type: 'configuration-versions', attributes },
    });
    expect(created.status).toBe(201);
    return { id: created.body.data.id as string, url: String(created.body.data.attributes['upload-url']) };
  }

  const put = (url: string, body: Buffer) => fetch(url, { method: 'PUT', body, headers: { Connection: 'close' } });

  async function runsOf(versionId: string): Promise<number> {
    const { rows } = await (
      await nativePool(h.orm.em)
    ).query<{ count: string }>('select count(*) from runs where configuration_version_id = $1', [versionId]);
    return Number(rows[0]?.count);
  }

  /** The SHA-256 of the archive the version keeps in storage (null: none). */
  async function storedArchive(versionId: string): Promise<string | null> {
    const { rows } = await (
      await nativePool(h.orm.em)
    ).query<{ sha256: string | null }>(
      'select o.sha256 from configuration_versions v join stored_objects o on o.key = v.archive_key where v.id = $1',
      [versionId],
    );
    return rows[0]?.sha256 ?? null;
  }
  const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

  it.each(trials.map((uploads, index) => [uploads, index + 1]))(
    '%i uploads at once (trial %i) → exactly one run, one 200, the rest refused',
    async (uploads) => {
      const version = await newVersion();
      // Half send one archive and half another, so an upload that overwrote the used one would show.
      const responses = await Promise.all(
        Array.from({ length: uploads }, (_, index) => put(version.url, index % 2 === 0 ? archive : other)),
      );
      const statuses = responses.map((res) => res.status);
      expect(statuses.filter((status) => status === 200)).toHaveLength(1);
      // The rest: the version is in use (409), or the rate limiter refused them first (429). Never a 5xx.
      expect(statuses.filter((status) => status !== 200 && status !== 409 && status !== 429)).toEqual([]);
      const refused = responses.find((res) => res.status === 409);
      if (refused) {
        const body = (await refused.json()) as { errors: { status: string; title: string; detail: string }[] };
        expect(body.errors[0]).toMatchObject({ status: '409', title: 'conflict', detail: expect.stringContaining('A run uses this') });
      }
      expect(await runsOf(version.id)).toBe(1);
      // The archive kept is one whole upload, and uploading again cannot change it now.
      const kept = await storedArchive(version.id);
      expect([sha256(archive), sha256(other)]).toContain(kept);
      expect((await put(version.url, kept === sha256(archive) ? other : archive)).status).toBe(409);
      expect(await storedArchive(version.id)).toBe(kept);
      expect(await runsOf(version.id)).toBe(1);
    },
  );

  it('an errored upload can be fixed by the next one, which queues the one run', async () => {
    const version = await newVersion();
    const notTar = Buffer.from([
      0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ]);
    expect((await put(version.url, notTar)).status).toBe(422);
    expect(await runsOf(version.id)).toBe(0);
    expect((await put(version.url, archive)).status).toBe(200);
    expect(await runsOf(version.id)).toBe(1);
  });

  it('without auto-queue, uploads replace the archive and queue nothing', async () => {
    const version = await newVersion({ 'auto-queue-runs': false });
    const statuses = await Promise.all(Array.from({ length: 8 }, (_, index) => put(version.url, index % 2 === 0 ? archive : other)));
    expect(statuses.filter((res) => res.status === 200).length).toBeGreaterThanOrEqual(1);
    expect(statuses.filter((res) => ![200, 429].includes(res.status))).toEqual([]);
    // The burst may have used this second's rate limit (30 a second, the default): the next upload waits its turn.
    const last = await eventually(async () => {
      const res = await put(version.url, other);
      return res.status === 429 ? undefined : res;
    });
    expect(last.status).toBe(200);
    expect(await storedArchive(version.id)).toBe(sha256(other));
    expect(await runsOf(version.id)).toBe(0);
  });
});
