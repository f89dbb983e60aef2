import { createGunzip } from 'node:zlib';

export type ArchiveCheck = { ok: true } | { ok: false; status: 422; detail: string; errored: boolean };

const GZIP_MAGIC = [0x1f, 0x8b];
const TAR_BLOCK = 512;
/** How far an archive may expand when decompressed, as a multiple of the upload limit. */
const EXPANSION_LIMIT = 10;

/** What streaming an upload through gunzip found: the first bytes it kept and how many it inflated in all. */
export type Inflation =
  { ok: true; head: Buffer; inflatedBytes: number } | { ok: false; reason: 'invalid' | 'too-large'; inflatedBytes: number };

/**
 * Streams `gzip` through zlib, keeping only the first `keep` bytes of output and counting the rest, and
 * stops (destroying the stream) once the output passes `limit` bytes. Bounded, so a small upload cannot
 * expand into gigabytes (a "zip bomb"): at most `keep` bytes and one zlib chunk are held at any time,
 * however far the data expands, and zlib runs on the thread pool, so the event loop keeps serving. The
 * whole stream is still read (up to `limit`), because truncation and a corrupt body only show at its
 * end (the CRC and length trailer); `ok` means gzip itself would accept it.
 */
export function inflateHead(gzip: Buffer, keep: number, limit: number): Promise<Inflation> {
  return new Promise((resolve) => {
    const gunzip = createGunzip();
    const kept: Buffer[] = [];
    let keptBytes = 0;
    let inflatedBytes = 0;
    let settled = false;
    const settle = (result: Inflation): void => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    gunzip.on('data', (chunk: Buffer) => {
      if (settled) return;
      inflatedBytes += chunk.length;
      if (keptBytes < keep) {
        // A copy, so the chunk itself is not kept alive by the slice.
        const part = Buffer.from(chunk.subarray(0, keep - keptBytes));
        kept.push(part);
        keptBytes += part.length;
      }
      if (inflatedBytes > limit) {
        settle({ ok: false, reason: 'too-large', inflatedBytes });
        gunzip.destroy();
      }
    });
    gunzip.on('error', () => settle({ ok: false, reason: 'invalid', inflatedBytes }));
    gunzip.on('end', () => settle({ ok: true, head: Buffer.concat(kept, keptBytes), inflatedBytes }));
    gunzip.end(gzip);
  });
}

/**
 * A configuration version must be a gzip-compressed tar archive. Not gzip at all → rejected outright
 * (the upload URL stays usable); gzip that does not hold a tar archive → the version is `errored`.
 */
export async function checkArchive(archive: Buffer, maxBytes: number): Promise<ArchiveCheck> {
  if (archive.length < 2 || archive[0] !== GZIP_MAGIC[0] || archive[1] !== GZIP_MAGIC[1]) {
    return { ok: false, status: 422, detail: 'The upload must be a gzip-compressed tar archive (.tar.gz).', errored: false };
  }
  // Bounded, so a small upload cannot expand into gigabytes (a "zip bomb"): only the first tar block is
  // kept, the rest is inflated to check the gzip stream and dropped chunk by chunk (see inflateHead).
  const inflated = await inflateHead(archive, TAR_BLOCK, maxBytes * EXPANSION_LIMIT);
  if (!inflated.ok) {
    const reason = inflated.reason === 'too-large' ? 'it expands beyond the size limit' : 'it is not valid gzip data';
    return { ok: false, status: 422, detail: `The archive could not be decompressed: ${reason}.`, errored: true };
  }
  const header = inflated.head;
  const isEmptyArchive = header.length >= TAR_BLOCK && header.every((byte) => byte === 0);
  const isTar = header.length >= TAR_BLOCK && header.subarray(257, 262).toString('latin1') === 'ustar';
  if (!isTar && !isEmptyArchive) return { ok: false, status: 422, detail: 'The decompressed upload is not a tar archive.', errored: true };
  return { ok: true };
}
