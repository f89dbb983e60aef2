import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { downloadsUnderWay, downloadsWaiting } from '../src/ops/download-slots.ts';
import {
  api,
  createTeam,
  createTeamToken,
  eventually,
  grantWorkspace,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Concurrent downloads are bounded per token and in all (docs/limits-and-security.md, "Concurrent
 * downloads"): past the bound a 429 with Retry-After; a slot is given back when the response ends and
 * when the client goes away mid-download. A download is held open by a real client that stops reading
 * a 24 MiB archive, so the server's socket fills and the response cannot end.
 */
describe('concurrent downloads', () => {
  let h: Harness;
  let f: Fixture;
  let versionId: string;

  /** A .tar.gz of incompressible data: it stays as large as it is, so its download outlasts the socket buffers. */
  function largeArchive(bytes: number): Buffer {
    const dir = mkdtempSync(join(tmpdir(), 'runtasks-large-'));
    try {
      writeFileSync(join(dir, 'blob.bin'), randomBytes(bytes));
      return execFileSync('tar', ['-czf', '-', '-C', dir, 'blob.bin'], { maxBuffer: 2 * bytes });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  beforeAll(async () => {
    h = await startHarness({
      ops: true,
      reachableBaseUrl: true,
      env: { DOWNLOADS_PER_TOKEN: '1', DOWNLOADS_TOTAL: '2', DOWNLOADS_WAIT_SECONDS: '2' },
    });
    f = await seedOrganization(h, 'download-slots');
    const created = await api(h, 'post', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken, {
      data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false } },
    });
    versionId = created.body.data.id as string;
    const upload = await fetch(String(created.body.data.attributes['upload-url']), { method: 'PUT', body: largeArchive(24 * 1024 * 1024) });
    expect(upload.status).toBe(200);
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  const path = () => `/api/v2/configuration-versions/${versionId}/download`;
  const download = (token: string) => fetch(`${h.baseUrl}${path()}`, { headers: { Authorization: `Bearer ${token}` } });

  /** Starts a download and stops reading once its status line is in: the response stays under way. */
  function stalledDownload(token: string): Promise<Socket> {
    const { port } = new URL(h.baseUrl);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () => {
        socket.write(`GET ${path()} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n\r\n`);
      });
      socket.once('data', (chunk: Buffer) => {
        expect(chunk.toString('latin1')).toMatch(/^HTTP\/1\.1 200/);
        socket.pause();
        resolve(socket);
      });
      socket.on('error', reject);
    });
  }

  it('a finished download gives its slot back: more downloads one after another than the bound', async () => {
    for (let index = 0; index < 3; index += 1) {
      const res = await download(f.organizationToken);
      expect(res.status).toBe(200);
      expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(24 * 1024 * 1024);
      await eventually(async () => (downloadsUnderWay(h.config) === 0 ? true : undefined));
    }
  }, 60_000);

  it('past the bound per token a 429 with Retry-After and a JSON:API error; a client going away frees the slot', async () => {
    const stalled = await stalledDownload(f.organizationToken);
    expect(downloadsUnderWay(h.config)).toBe(1);
    const refused = await download(f.organizationToken);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    const body = (await refused.json()) as { errors: { status: string; title: string; detail: string }[] };
    expect(body.errors[0]).toMatchObject({
      status: '429',
      title: 'too many requests',
      detail: expect.stringContaining('DOWNLOADS_PER_TOKEN'),
    });
    // Another token still gets its download meanwhile: the bound is per token.
    const other = await download(await createTeamToken(h, f.organizationToken, f.teamId));
    expect([200, 404]).toContain(other.status);
    await other.arrayBuffer();
    stalled.destroy();
    await eventually(async () => (downloadsUnderWay(h.config) === 0 ? true : undefined));
    const after = await download(f.organizationToken);
    expect(after.status).toBe(200);
    await after.arrayBuffer();
  }, 60_000);

  it('past the bound in all a download waits its turn, and gets the slot one gives back', async () => {
    const teams = await Promise.all(['three', 'four'].map((name) => createTeam(h, f.organization, f.organizationToken, `slots-${name}`)));
    for (const teamId of teams) await grantWorkspace(h, f.organizationToken, teamId, f.workspaceId, { access: 'read' });
    const [three, four] = await Promise.all(teams.map((teamId) => createTeamToken(h, f.organizationToken, teamId)));
    const first = await stalledDownload(f.organizationToken);
    const second = await stalledDownload(three as string);
    expect(downloadsUnderWay(h.config)).toBe(2);
    // Waits (DOWNLOADS_WAIT_SECONDS) rather than being refused; the first download's end lets it through.
    const waiting = download(four as string);
    await eventually(async () => (downloadsWaiting(h.config) === 1 ? true : undefined));
    first.destroy();
    const third = await waiting;
    expect(third.status).toBe(200);
    await third.arrayBuffer();
    second.destroy();
    await eventually(async () => (downloadsUnderWay(h.config) === 0 ? true : undefined));
  }, 60_000);

  it('past the bound in all and its wait a 429, whoever asks; other requests are still answered', async () => {
    const teams = await Promise.all(['one', 'two'].map((name) => createTeam(h, f.organization, f.organizationToken, `slots-${name}`)));
    for (const teamId of teams) await grantWorkspace(h, f.organizationToken, teamId, f.workspaceId, { access: 'read' });
    const [one, two] = await Promise.all(teams.map((teamId) => createTeamToken(h, f.organizationToken, teamId)));
    const first = await stalledDownload(f.organizationToken);
    const second = await stalledDownload(one as string);
    expect(downloadsUnderWay(h.config)).toBe(2);
    const third = await download(two as string);
    expect(third.status).toBe(429);
    expect(((await third.json()) as { errors: { detail: string }[] }).errors[0]?.detail).toContain('DOWNLOADS_TOTAL');
    // Not a download: answered as ever while the downloads are under way.
    expect((await api(h, 'get', `/workspaces/${f.workspaceId}`, f.organizationToken)).status).toBe(200);
    first.destroy();
    second.destroy();
    await eventually(async () => (downloadsUnderWay(h.config) === 0 ? true : undefined));
  }, 60_000);
});

/**
 * Downloads give way to the process's other requests (docs/limits-and-security.md, "Concurrent
 * downloads"): while another request is being handled, a download sends a chunk at most every
 * DOWNLOADS_YIELD_MS. The other request is held open by a real client that sends its headers and not
 * its small body, so the server handles it (waits for its body) until the client goes away.
 */
describe('downloads give way to other requests', () => {
  let h: Harness;
  let f: Fixture;
  let versionId: string;
  const ARCHIVE_BYTES = 24 * 1024 * 1024;

  beforeAll(async () => {
    h = await startHarness({ ops: true, reachableBaseUrl: true, env: { DOWNLOADS_YIELD_MS: '500' } });
    f = await seedOrganization(h, 'download-yield');
    const created = await api(h, 'post', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken, {
      data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false } },
    });
    versionId = created.body.data.id as string;
    const dir = mkdtempSync(join(tmpdir(), 'runtasks-large-'));
    try {
      writeFileSync(join(dir, 'blob.bin'), randomBytes(ARCHIVE_BYTES));
      const archive = execFileSync('tar', ['-czf', '-', '-C', dir, 'blob.bin'], { maxBuffer: 2 * ARCHIVE_BYTES });
      const upload = await fetch(String(created.body.data.attributes['upload-url']), { method: 'PUT', body: archive });
      expect(upload.status).toBe(200);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  /** A request the server is handling until the returned socket is destroyed: its body never comes. */
  function heldRequest(): Promise<Socket> {
    const { port } = new URL(h.baseUrl);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () => {
        socket.write(
          `POST /api/v2/organizations/${f.organization}/workspaces HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${f.organizationToken}\r\nContent-Type: application/vnd.api+json\r\nContent-Length: 100\r\n\r\n`,
          () => resolve(socket),
        );
      });
      socket.on('error', reject);
    });
  }

  it('sends little while another request is handled, and the rest once it ended', async () => {
    const held = await heldRequest();
    const response = await fetch(`${h.baseUrl}/api/v2/configuration-versions/${versionId}/download`, {
      headers: { Authorization: `Bearer ${f.organizationToken}` },
    });
    expect(response.status).toBe(200);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let received = 0;
    const reading = (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        received += value.byteLength;
      }
    })();
    // A chunk every 500 ms at most: in 2 s, some 5 of the archive's 97 chunks of 256 KiB (and never all).
    const started = Date.now();
    while (Date.now() - started < 2_000) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(received).toBeLessThan(ARCHIVE_BYTES / 4);
    held.destroy();
    await reading;
    expect(received).toBeGreaterThan(ARCHIVE_BYTES);
  }, 60_000);
});
