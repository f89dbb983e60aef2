import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** A real .tar.gz whose one file is `bytes` of random text: it barely compresses, so the archive is about that large. */
export function largeArchive(bytes: number): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'runtasks-large-'));
  try {
    writeFileSync(join(dir, 'data.txt'), randomBytes(Math.ceil((bytes * 3) / 4)).toString('base64'));
    return execFileSync('tar', ['-czf', '-', '-C', dir, 'data.txt'], { maxBuffer: bytes * 4 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Sends `body` chunked (no Content-Length, so the server learns its size only as it arrives), a part at
 * a time, and reads the whole answer. `stallAfter`: stop sending after that many bytes and wait for the
 * answer (a client that withholds the rest). `paceMs`: wait that long between parts (a slow link). The
 * answer may come before the body is sent.
 */
export function sendChunked(
  url: string,
  method: 'PUT' | 'POST',
  body: Buffer,
  options: { headers?: Record<string, string>; partBytes?: number; stallAfter?: number; paceMs?: number } = {},
): Promise<RawResponse> {
  const partBytes = options.partBytes ?? 64 * 1024;
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers: { 'Transfer-Encoding': 'chunked', ...options.headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    let answered = false;
    req.on('response', () => (answered = true));
    req.on('error', reject);
    void (async () => {
      const end = options.stallAfter ?? body.length;
      for (let offset = 0; offset < end && !answered; offset += partBytes) {
        if (!req.write(body.subarray(offset, Math.min(end, offset + partBytes)))) await once(req, 'drain');
        if (options.paceMs) await new Promise((resolve) => setTimeout(resolve, options.paceMs));
      }
      if (options.stallAfter === undefined) req.end();
    })().catch(() => undefined);
  });
}

/** A GET of the whole answer, as bytes. */
export function getRaw(url: string, headers: Record<string, string> = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
