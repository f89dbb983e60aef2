import { gunzipSync } from 'node:zlib';

export type ArchiveCheck = { ok: true } | { ok: false; status: 422; detail: string; errored: boolean };

const GZIP_MAGIC = [0x1f, 0x8b];
const TAR_BLOCK = 512;

/**
 * A configuration version must be a gzip-compressed tar archive. Not gzip at all → rejected outright
 * (the upload URL stays usable); gzip that does not hold a tar archive → the version is `errored`.
 */
export function checkArchive(archive: Buffer, maxBytes: number): ArchiveCheck {
  if (archive.length < 2 || archive[0] !== GZIP_MAGIC[0] || archive[1] !== GZIP_MAGIC[1]) {
    return { ok: false, status: 422, detail: 'The upload must be a gzip-compressed tar archive (.tar.gz).', errored: false };
  }
  let tar: Buffer;
  try {
    // Bounded, so a small upload cannot expand into gigabytes (a "zip bomb").
    tar = gunzipSync(archive, { maxOutputLength: maxBytes * 10 });
  } catch (error) {
    const reason =
      (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' ? 'it expands beyond the size limit' : 'it is not valid gzip data';
    return { ok: false, status: 422, detail: `The archive could not be decompressed: ${reason}.`, errored: true };
  }
  const header = tar.subarray(0, TAR_BLOCK);
  const isEmptyArchive = tar.length >= TAR_BLOCK && header.every((byte) => byte === 0);
  const isTar = tar.length >= TAR_BLOCK && header.subarray(257, 262).toString('latin1') === 'ustar';
  if (!isTar && !isEmptyArchive) return { ok: false, status: 422, detail: 'The decompressed upload is not a tar archive.', errored: true };
  return { ok: true };
}
