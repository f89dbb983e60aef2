import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { configurationArchive } from '../../../test/support/archives.ts';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { api, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Configuration versions as go-tfe's tests use them: the whole document (with `provisional`), uploading
 * again to one URL, and archiving (HCP's 202, or 409 `transition not allowed` with HCP's reason).
 */

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

describe('configuration versions (golden)', () => {
  let h: Harness;
  let f: Fixture;

  beforeAll(async () => {
    h = await startHarness();
    f = await seedOrganization(h, uniqueName('cvgold'));
  });

  afterAll(async () => {
    await h?.close();
  });

  async function createVersion(attributes: Record<string, unknown> = { 'auto-queue-runs': false }) {
    const res = await api(h, 'post', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken, {
      data: { type: 'configuration-versions', attributes },
    });
    expect(res.status).toBe(201);
    return res.body.data as { id: string; attributes: Record<string, unknown> };
  }

  const put = (uploadUrl: unknown, body: Buffer) =>
    h.http
      .put(new URL(String(uploadUrl)).pathname)
      .set('Content-Type', 'application/octet-stream')
      .send(body);
  const show = async (id: string) => (await api(h, 'get', `/configuration-versions/${id}`, f.organizationToken)).body.data;
  const archive = (id: string) => api(h, 'post', `/configuration-versions/${id}/actions/archive`, f.organizationToken);
  const download = (id: string) =>
    h.http
      .get(`/api/v2/configuration-versions/${id}/download`)
      .set('Authorization', `Bearer ${f.organizationToken}`)
      .buffer(true)
      .parse((res, done) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => done(null, Buffer.concat(chunks)));
      });

  it('shows the whole document, provisional included', async () => {
    const version = await createVersion({ 'auto-queue-runs': false, provisional: true });
    expect(version.attributes).toEqual({
      'auto-queue-runs': false,
      error: null,
      'error-message': null,
      source: 'tfe-api',
      speculative: false,
      provisional: true,
      status: 'pending',
      'status-timestamps': {},
      'changed-files': [],
      'upload-url': expect.stringMatching(/\/api\/v2\/uploads\/configuration-versions\/rtup_/),
    });
    expect((await show(version.id)).attributes).toMatchObject({ provisional: true, 'upload-url': null });
    expect((await createVersion()).attributes.provisional).toBe(false);
  });

  it('replaces the archive on a second upload, until a run uses the version (409)', async () => {
    const version = await createVersion();
    const first = configurationArchive('# first\n');
    const second = configurationArchive('# second\n');
    expect((await put(version.attributes['upload-url'], first)).status).toBe(200);
    expect((await show(version.id)).attributes).toMatchObject({ status: 'uploaded', 'status-timestamps': { 'uploaded-at': ISO } });
    expect((await put(version.attributes['upload-url'], second)).status).toBe(200);
    expect(Buffer.compare((await download(version.id)).body as Buffer, second)).toBe(0);
    const run = await api(h, 'post', '/runs', f.organizationToken, {
      data: {
        type: 'runs',
        relationships: {
          workspace: { data: { type: 'workspaces', id: f.workspaceId } },
          'configuration-version': { data: { type: 'configuration-versions', id: version.id } },
        },
      },
    });
    expect(run.status).toBe(201);
    expectError(await put(version.attributes['upload-url'], first), 409);
    expect(Buffer.compare((await download(version.id)).body as Buffer, second)).toBe(0);
  });

  it('an errored upload can be fixed by uploading a good archive', async () => {
    const version = await createVersion();
    expectError(await put(version.attributes['upload-url'], Buffer.from([0x1f, 0x8b, 0, 0])), 422);
    expect((await show(version.id)).attributes.status).toBe('errored');
    expect((await put(version.attributes['upload-url'], configurationArchive())).status).toBe(200);
    expect((await show(version.id)).attributes).toMatchObject({ status: 'uploaded', error: null, 'error-message': null });
  });

  it('archives only an uploaded version that is not current and that no unfinished run uses', async () => {
    const pending = await createVersion();
    const refused = async (id: string, reason: string) => {
      const res = await archive(id);
      expect(expectError(res, 409)).toMatchObject({ title: 'transition not allowed' });
      expect(res.body.errors[0].detail).toBe(`The configuration could not be archived because ${reason}.`);
    };
    await refused(pending.id, 'it is pending');
    const old = await createVersion();
    expect((await put(old.attributes['upload-url'], configurationArchive())).status).toBe(200);
    await refused(old.id, 'it is current');
    // The workspace names its current version (go-tfe reads it after a provisional upload).
    const current = async () =>
      (await api(h, 'get', `/workspaces/${f.workspaceId}`, f.organizationToken)).body.data.relationships['current-configuration-version'];
    expect(await current()).toEqual({ data: { type: 'configuration-versions', id: old.id } });
    // A provisional version never becomes current by being uploaded.
    const provisional = await createVersion({ 'auto-queue-runs': false, provisional: true });
    expect((await put(provisional.attributes['upload-url'], configurationArchive())).status).toBe(200);
    await refused(old.id, 'it is current');
    expect(await current()).toEqual({ data: { type: 'configuration-versions', id: old.id } });
    const newer = await createVersion();
    expect((await put(newer.attributes['upload-url'], configurationArchive())).status).toBe(200);
    expect(await current()).toEqual({ data: { type: 'configuration-versions', id: newer.id } });

    expect((await archive(old.id)).status).toBe(202);
    expect((await show(old.id)).attributes).toMatchObject({ status: 'archived', 'status-timestamps': { 'archived-at': ISO } });
    expect((await download(old.id)).status).toBe(404);
    await refused(old.id, 'it is archived');
    expectNotFound(await put(old.attributes['upload-url'], configurationArchive()));
    expect((await archive(provisional.id)).status).toBe(202);
    expectNotFound(await archive('cv-doesnotexist0000'));
  });

  it('refuses to archive a version an unfinished run uses, and a run on an archived version', async () => {
    const used = await createVersion();
    expect((await put(used.attributes['upload-url'], configurationArchive())).status).toBe(200);
    const relationships = {
      workspace: { data: { type: 'workspaces', id: f.workspaceId } },
      'configuration-version': { data: { type: 'configuration-versions', id: used.id } },
    };
    const run = await api(h, 'post', '/runs', f.organizationToken, { data: { type: 'runs', relationships } });
    expect(run.status).toBe(201);
    const newer = await createVersion();
    expect((await put(newer.attributes['upload-url'], configurationArchive())).status).toBe(200);
    const res = await archive(used.id);
    expect(res.status).toBe(409);
    expect(res.body.errors[0].detail).toBe('The configuration could not be archived because it is in use by a run.');
    expect((await api(h, 'post', `/runs/${run.body.data.id}/actions/discard`, f.organizationToken)).status).toBe(202);
    await eventually(async () => ((await archive(used.id)).status === 202 ? true : undefined));
    const again = await api(h, 'post', '/runs', f.organizationToken, { data: { type: 'runs', relationships } });
    expectError(again, 422, '/data/relationships/configuration-version/data/id');
  });
});
