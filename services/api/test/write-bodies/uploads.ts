import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

/** Bytes for the raw routes (properties 6 and 7). */

// ---------------------------------------------------------------------------------------------
// Bytes for property 6 (the raw upload route).

/** CONFIGURATION_VERSION_MAX_BYTES of this file's API: small, so property 6's buffers (up to 64 KiB) often exceed it. */
export const MAX_UPLOAD_BYTES = 16 * 1024;
/** PLAN_JSON_MAX_BYTES of this file's API: small, so property 7's padded plans often exceed it. */
export const MAX_PLAN_REPORT_BYTES = 8 * 1024;

/** Deterministic noise (xorshift32): fast-check draws a seed and a length, not 64 Ki separate values. */
export function noiseOf(seed: number, length: number): Buffer {
  const bytes = Buffer.alloc(length);
  let state = seed >>> 0 || 0x9e3779b9;
  for (let index = 0; index < length; index += 1) {
    state = (state ^ (state << 13)) >>> 0;
    state = (state ^ (state >>> 17)) >>> 0;
    state = (state ^ (state << 5)) >>> 0;
    bytes[index] = state & 0xff;
  }
  return bytes;
}

/** A real .tar.gz made by the system's tar: main.tf, and optionally a file of incompressible bytes. */
export function tarGz(mainTf: string, extra: Buffer | null = null): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'runtasks-upload-'));
  try {
    writeFileSync(join(dir, 'main.tf'), mainTf);
    if (extra) writeFileSync(join(dir, 'blob.bin'), extra);
    return execFileSync('tar', ['-czf', '-', '-C', dir, 'main.tf', ...(extra ? ['blob.bin'] : [])]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The oracle for "a real tar.gz": the system's tar lists it without complaint. */
export function tarLists(bytes: Buffer): boolean {
  try {
    execFileSync('tar', ['-tzf', '-'], { input: bytes, stdio: ['pipe', 'ignore', 'ignore'] });
    return true;
  } catch {
    return false;
  }
}

export interface Upload {
  kind: string;
  bytes: Buffer;
  /** Made by tar -czf and left alone: must be accepted when within the limit. */
  real: boolean;
}
export const GZIP_MAGIC = Buffer.from([0x1f, 0x8b]);
export const UPLOAD_SAMPLE_MAX = 64 * 1024;
export const uploadLength = fc.oneof(
  fc.integer({ min: 0, max: 600 }),
  fc.integer({ min: 0, max: UPLOAD_SAMPLE_MAX }),
  fc.constantFrom(MAX_UPLOAD_BYTES - 1, MAX_UPLOAD_BYTES, MAX_UPLOAD_BYTES + 1),
);
export const noise = fc.tuple(fc.integer(), uploadLength).map(([seed, length]) => noiseOf(seed, length));
export const realArchive = fc
  .tuple(fc.string({ unit: 'grapheme', maxLength: 200 }), fc.option(fc.tuple(fc.integer(), fc.integer({ min: 1, max: 24 * 1024 }))))
  .map(([main, extra]) => tarGz(main, extra ? noiseOf(...extra) : null));
export const uploads: fc.Arbitrary<Upload> = fc.oneof(
  noise.map((bytes) => ({ kind: 'random bytes', bytes, real: false })),
  noise.map((bytes) => ({ kind: 'gzip magic, then random bytes', bytes: Buffer.concat([GZIP_MAGIC, bytes]), real: false })),
  noise.map((bytes) => ({ kind: 'gzip of random bytes', bytes: gzipSync(bytes), real: false })),
  // Up to 4 MiB of zeros: an empty tar archive, or a small upload that expands past the limit (a "zip bomb").
  fc
    .integer({ min: 0, max: 4 * 1024 * 1024 })
    .map((length) => ({ kind: `gzip of ${length} zero bytes`, bytes: gzipSync(Buffer.alloc(length)), real: false })),
  realArchive.map((bytes) => ({ kind: 'a real archive', bytes, real: true })),
  fc.tuple(realArchive, fc.nat(), fc.integer({ min: 1, max: 255 })).map(([bytes, at, xor]) => {
    const changed = Buffer.from(bytes);
    changed[at % changed.length] ^= xor;
    return { kind: `a real archive, byte ${at % changed.length} changed`, bytes: changed, real: false };
  }),
  fc
    .tuple(realArchive, fc.nat())
    .map(([bytes, at]) => ({ kind: 'a real archive cut short', bytes: bytes.subarray(0, at % bytes.length), real: false })),
);
export const uploadContentTypes = fc.option(
  fc.oneof(
    fc.constantFrom(
      'application/octet-stream',
      'application/gzip',
      'application/x-gzip',
      'application/x-tar',
      'application/json',
      'application/vnd.api+json',
      'application/vnd.api+json; ext=bulk',
      'text/plain; charset=utf-8',
      'multipart/form-data; boundary=x',
      'application/x-www-form-urlencoded',
      '',
    ),
    fc.string({ maxLength: 40 }).filter((value) => /^[\x20-\x7e]*$/.test(value)),
  ),
  { nil: null },
);
