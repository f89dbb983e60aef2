import { once } from 'node:events';
import { createGunzip, type Gunzip } from 'node:zlib';
import { DB_NOW_ISO, numbered } from '@runtasks/shared/db';
import type { PoolClient } from 'pg';

export type ArchiveCheck = { ok: true } | { ok: false; status: 422; detail: string; errored: boolean };

const GZIP_MAGIC = [0x1f, 0x8b];
const TAR_BLOCK = 512;
/** How far an archive may expand when decompressed, as a multiple of the upload limit. */
const EXPANSION_LIMIT = 10;

/** What streaming an upload through gunzip found: the first bytes it kept and how many it inflated in all. */
export type Inflation =
  { ok: true; head: Buffer; inflatedBytes: number } | { ok: false; reason: 'invalid' | 'too-large'; inflatedBytes: number };

/**
 * Inflates gzip pushed to it chunk by chunk, keeping only the first `keep` bytes of output and counting
 * the rest, and stops (destroying the stream) once the output passes `limit` bytes. Bounded, so a small
 * upload cannot expand into gigabytes (a "zip bomb"): at most `keep` bytes, one zlib chunk and one
 * pushed chunk are held at any time, however far the data expands; zlib runs on the thread pool, so
 * the event loop keeps serving. The whole stream is still read (up to `limit`), because truncation and
 * a corrupt body only show at its end (the CRC and length trailer); `ok` means gzip itself would accept it.
 */
export class Inflater {
  readonly #gunzip: Gunzip = createGunzip();
  readonly #kept: Buffer[] = [];
  #keptBytes = 0;
  #inflatedBytes = 0;
  #result: Inflation | undefined;
  readonly #settled: Promise<Inflation>;

  constructor(keep: number, limit: number) {
    let resolve: (result: Inflation) => void = () => undefined;
    this.#settled = new Promise((done) => (resolve = done));
    const settle = (result: Inflation): void => {
      if (this.#result) return;
      this.#result = result;
      resolve(result);
    };
    this.#gunzip.on('data', (chunk: Buffer) => {
      if (this.#result) return;
      this.#inflatedBytes += chunk.length;
      if (this.#keptBytes < keep) {
        // A copy, so the chunk itself is not kept alive by the slice.
        const part = Buffer.from(chunk.subarray(0, keep - this.#keptBytes));
        this.#kept.push(part);
        this.#keptBytes += part.length;
      }
      if (this.#inflatedBytes > limit) {
        settle({ ok: false, reason: 'too-large', inflatedBytes: this.#inflatedBytes });
        this.#gunzip.destroy();
      }
    });
    this.#gunzip.on('error', () => settle({ ok: false, reason: 'invalid', inflatedBytes: this.#inflatedBytes }));
    this.#gunzip.on('end', () =>
      settle({ ok: true, head: Buffer.concat(this.#kept, this.#keptBytes), inflatedBytes: this.#inflatedBytes }),
    );
  }

  /** Feeds a chunk, waiting while zlib is behind (so the input waiting for it stays one chunk); nothing once the result is known. */
  async push(chunk: Buffer): Promise<void> {
    if (this.#result) return;
    if (!this.#gunzip.write(chunk)) await Promise.race([once(this.#gunzip, 'drain'), this.#settled]);
  }

  /** The end of the input: what gzip made of it. */
  finish(): Promise<Inflation> {
    if (!this.#result) this.#gunzip.end();
    return this.#settled;
  }
}

/** Streams a whole buffer through an Inflater (see there). */
export async function inflateHead(gzip: Buffer, keep: number, limit: number): Promise<Inflation> {
  const inflater = new Inflater(keep, limit);
  await inflater.push(gzip);
  return inflater.finish();
}

const NOT_GZIP: ArchiveCheck = {
  ok: false,
  status: 422,
  detail: 'The upload must be a gzip-compressed tar archive (.tar.gz).',
  errored: false,
};

/**
 * Checks a configuration archive as it streams in: a configuration version must be a gzip-compressed
 * tar archive. Not gzip at all → rejected outright, as soon as the first two bytes show it (the upload
 * URL stays usable); gzip that does not hold a tar archive → the version is `errored`. Holds only the
 * first tar block and what zlib works on (see Inflater), never the archive.
 */
export class ArchiveInspector {
  readonly #inflater: Inflater;
  #magic = Buffer.alloc(0);

  constructor(maxBytes: number) {
    // Bounded, so a small upload cannot expand into gigabytes: only the first tar block is kept.
    this.#inflater = new Inflater(TAR_BLOCK, maxBytes * EXPANSION_LIMIT);
  }

  /** Takes the next chunk; where the upload is not gzip, the refusal (the caller stops reading and answers it). */
  async push(chunk: Buffer): Promise<ArchiveCheck | undefined> {
    if (this.#magic.length < GZIP_MAGIC.length) {
      this.#magic = Buffer.concat([this.#magic, chunk.subarray(0, GZIP_MAGIC.length - this.#magic.length)]);
      if (this.#magic.some((byte, index) => byte !== GZIP_MAGIC[index])) return NOT_GZIP;
    }
    await this.#inflater.push(chunk);
    return undefined;
  }

  async finish(): Promise<ArchiveCheck> {
    if (this.#magic.length < GZIP_MAGIC.length) return NOT_GZIP;
    const inflated = await this.#inflater.finish();
    if (!inflated.ok) {
      const reason = inflated.reason === 'too-large' ? 'it expands beyond the size limit' : 'it is not valid gzip data';
      return { ok: false, status: 422, detail: `The archive could not be decompressed: ${reason}.`, errored: true };
    }
    const header = inflated.head;
    const isEmptyArchive = header.length >= TAR_BLOCK && header.every((byte) => byte === 0);
    const isTar = header.length >= TAR_BLOCK && header.subarray(257, 262).toString('latin1') === 'ustar';
    if (!isTar && !isEmptyArchive)
      return { ok: false, status: 422, detail: 'The decompressed upload is not a tar archive.', errored: true };
    return { ok: true };
  }
}

/** The check of ArchiveInspector, of an archive already in memory. */
export async function checkArchive(archive: Buffer, maxBytes: number): Promise<ArchiveCheck> {
  const inspector = new ArchiveInspector(maxBytes);
  const refused = await inspector.push(archive);
  return refused ?? inspector.finish();
}

/** What one upload leaves on its version: `uploaded` with the archive, or `errored` with why. */
export interface UploadOutcome {
  status: 'uploaded' | 'errored';
  errorMessage: string | null;
  /** The stored archive (null: an errored upload keeps none). */
  archiveKey: string | null;
  size: number;
}

/**
 * Stores an upload on its version, or refuses it (undefined): a run uses the version, or it was archived
 * or its URL spent. The version's row is locked first, so concurrent uploads are decided by PostgreSQL's
 * row lock: each waits for the one before and sees the row as that one left it. The update's condition is
 * on that row: an auto-queue version that reached `uploaded` has queued its run (in the same transaction),
 * so exactly one upload to it queues one, however many arrive at once; a later one is refused. (The
 * `not exists` alone could not decide that: under READ COMMITTED it does not see a run another upload
 * inserted after this statement began.) A version without auto-queue takes new archives until a run is
 * created on it; the archive it replaced is returned, for removal once this has committed.
 */
export async function storeUpload(
  client: PoolClient,
  versionId: string,
  outcome: UploadOutcome,
): Promise<{ replacedKey: string | null } | undefined> {
  const { rows } = await client.query<{ archive_key: string | null }>(
    'select archive_key from configuration_versions where id = $1 for update',
    [versionId],
  );
  const stored = await client.query(
    numbered(`update configuration_versions set status = ?, error_message = ?, archive_key = ?, archive_size = ?,
              status_timestamps = status_timestamps || jsonb_build_object(?::text, ${DB_NOW_ISO}), updated_at = now()
        where id = ? and upload_token_hash is not null
          and (status in ('pending', 'errored') or (status = 'uploaded' and not auto_queue_runs))
          and not exists (select 1 from runs where runs.configuration_version_id = configuration_versions.id)`),
    [outcome.status, outcome.errorMessage, outcome.archiveKey, outcome.size, `${outcome.status}-at`, versionId],
  );
  return stored.rowCount === 1 ? { replacedKey: rows[0]?.archive_key ?? null } : undefined;
}
