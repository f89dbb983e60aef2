import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { brotliDecompressSync, createGunzip, gunzipSync } from 'node:zlib';
import { configurationArchive } from '../../../test/support/archives.ts';
import { api, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { rawGet, type RawResponse } from '../../../test/support/raw-http.ts';
import { buildApp } from '../src/app.ts';
import { COMPRESSION_THRESHOLD_BYTES } from '../src/http/compression.ts';
import type { RouteDef } from '../src/routes/define.ts';

/** Compression as a user's service has it: on by default, for pages, JSON and everything else compressible. */
describe('response compression', () => {
  let h: Harness;
  let f: Fixture;

  beforeAll(async () => {
    h = await startHarness({ ops: true });
    f = await seedOrganization(h, 'compression');
  }, 30_000);

  afterAll(async () => {
    await h?.close();
  });

  it('compresses JSON over the threshold with br or gzip, as the client accepts, and leaves small bodies alone', async () => {
    const plain = await rawGet(`${h.baseUrl}/openapi.json`);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body.length).toBeGreaterThan(COMPRESSION_THRESHOLD_BYTES);
    const document = JSON.parse(plain.body.toString('utf8')) as unknown;

    const gzip = await rawGet(`${h.baseUrl}/openapi.json`, { 'accept-encoding': 'gzip' });
    expect([gzip.headers['content-encoding'], gzip.headers.vary]).toEqual(['gzip', 'Accept-Encoding']);
    expect(JSON.parse(gunzipSync(gzip.body).toString('utf8'))).toEqual(document);
    expect(gzip.body.length).toBeLessThan(plain.body.length / 3);

    const br = await rawGet(`${h.baseUrl}/openapi.json`, { 'accept-encoding': 'gzip, deflate, br' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(JSON.parse(brotliDecompressSync(br.body).toString('utf8'))).toEqual(document);

    const small = await rawGet(`${h.baseUrl}/healthz`, { 'accept-encoding': 'gzip, br' });
    expect([small.status, small.headers['content-encoding'], small.body.toString()]).toEqual([200, undefined, '{"status":"ok"}']);
  });

  it('sends a configuration archive (already gzip) as it is', async () => {
    // Random text does not compress: the archive is well over the threshold.
    const archive = configurationArchive(`# ${randomBytes(6000).toString('base64')}\n`);
    expect(archive.length).toBeGreaterThan(COMPRESSION_THRESHOLD_BYTES);
    const created = await api(h, 'post', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken, {
      data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false } },
    });
    const version = created.body.data as { id: string; attributes: { 'upload-url': string } };
    await h.http.put(new URL(version.attributes['upload-url']).pathname).set('Content-Type', 'application/octet-stream').send(archive);
    await eventually(async () => {
      const shown = await api(h, 'get', `/configuration-versions/${version.id}`, f.organizationToken);
      return shown.body.data.attributes.status === 'uploaded' ? true : undefined;
    });
    const download = await rawGet(`${h.baseUrl}/api/v2/configuration-versions/${version.id}/download`, {
      authorization: `Bearer ${f.organizationToken}`,
      'accept-encoding': 'gzip, br',
    });
    expect(download.status).toBe(200);
    expect(download.headers['content-encoding']).toBeUndefined();
    expect(Buffer.compare(download.body, archive)).toBe(0);
  });

  it('streams a compressed stream: the client reads its first part before the rest is written', async () => {
    const stream = new PassThrough();
    const route: RouteDef = {
      method: 'GET',
      path: '/streamed',
      auth: 'public',
      handler: async (ctx) => {
        ctx.type = 'application/json';
        ctx.body = stream;
      },
    };
    const app = buildApp({ config: h.config, orm: h.orm, secrets: h.secrets, logger: h.logger, taskClient: h.taskClient }, [route]);
    const server: Server = await new Promise((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    try {
      const { port } = server.address() as AddressInfo;
      const first = `[${JSON.stringify('x'.repeat(COMPRESSION_THRESHOLD_BYTES * 2))}`;
      const received: string[] = [];
      const ended = new Promise<RawResponse['headers']>((resolve, reject) => {
        request(`http://127.0.0.1:${port}/api/v2/streamed`, { headers: { 'accept-encoding': 'gzip' } }, (response) => {
          const text = response.pipe(createGunzip());
          text.on('data', (chunk: Buffer) => {
            received.push(chunk.toString('utf8'));
            // Only once the first part has arrived is the rest written: a compressor that held it back would never end.
            if (received.join('') === first) stream.end(']');
          });
          text.on('end', () => resolve(response.headers));
          text.on('error', reject);
        })
          .on('error', reject)
          .end();
      });
      stream.write(first);
      const headers = await ended;
      expect(headers['content-encoding']).toBe('gzip');
      expect(JSON.parse(received.join(''))).toEqual(['x'.repeat(COMPRESSION_THRESHOLD_BYTES * 2)]);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
