import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readWhole, S3_PART_BYTES, S3ObjectStore } from '@runtasks/shared/storage';
import { startStorageBackend, type StorageBackend } from '../../../test/support/storage-backends.ts';

/**
 * The S3 store sends each part from its spool file (s3-store.ts): where S3 answers a part's request
 * with a 503 after taking its body, the SDK retries, and the retry must send the part's bytes again
 * (a stream the first attempt consumed would send none). A proxy in front of s3rver fails the first
 * PUT of each object and of each part once.
 */

let backend: StorageBackend;
let proxy: Server;
let store: S3ObjectStore;
/** The PUTs the proxy failed, by path and query. */
const failed = new Set<string>();

async function drain(req: IncomingMessage): Promise<void> {
  for await (const chunk of req) void chunk;
}

beforeAll(async () => {
  backend = await startStorageBackend('s3');
  const upstream = new URL(String(backend.env['S3_ENDPOINT']));
  proxy = createServer((req, res) => {
    const url = req.url ?? '/';
    if (req.method === 'PUT' && !failed.has(url)) {
      failed.add(url);
      void drain(req).then(() => {
        res.writeHead(503, { 'content-type': 'application/xml' });
        res.end('<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>once</Message></Error>');
      });
      return;
    }
    const forwarded = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const { port } = proxy.address() as AddressInfo;
  store = new S3ObjectStore({
    bucket: String(backend.env['S3_BUCKET']),
    endpoint: `http://127.0.0.1:${port}`,
    region: 'us-east-1',
    forcePathStyle: true,
  });
});
afterAll(async () => {
  store?.close();
  await new Promise((resolve) => proxy?.close(resolve));
  await backend?.close();
});

/** `bytes` in chunks of 64 KiB, as a request body arrives. */
async function* chunksOf(bytes: Buffer): AsyncGenerator<Buffer> {
  for (let offset = 0; offset < bytes.length; offset += 64 * 1024) yield bytes.subarray(offset, offset + 64 * 1024);
}

describe('S3 requests retried by the SDK (STORAGE_BACKEND=s3)', () => {
  it('sends a small object again whole after its PutObject failed once', async () => {
    const bytes = randomBytes(300_000);
    await store.write('retry/small', chunksOf(bytes));
    expect([...failed].filter((url) => url.includes('retry/small'))).toHaveLength(1);
    expect((await readWhole(store.read('retry/small'))).equals(bytes)).toBe(true);
  });

  it('sends each part again whole after its UploadPart failed once', async () => {
    const bytes = randomBytes(S3_PART_BYTES * 2 + 300_000);
    await store.write('retry/parts', chunksOf(bytes));
    expect([...failed].filter((url) => url.includes('retry/parts') && url.includes('partNumber'))).toHaveLength(3);
    expect((await readWhole(store.read('retry/parts'))).equals(bytes)).toBe(true);
  });
});
