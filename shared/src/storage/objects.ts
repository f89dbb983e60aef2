import { createHash, randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Pool } from 'pg';
import { ApiError } from '../errors.ts';
import { STORED_OBJECT_KINDS, type StoredObjectKind } from '../db/entities/index.ts';
import type { ObjectStore } from './object-store.ts';

/** Whose an object is, and what. */
export interface ObjectOwner {
  organizationId: string;
  workspaceId: string;
  kind: StoredObjectKind;
}

/** How much one object and one organization may hold; each refusal is the caller's error (a 413 naming its setting). */
export interface PutLimits {
  maxBytes: number;
  tooLarge: () => Error;
  /** The organization's quota in bytes (0: none). */
  quotaBytes: number;
  /** What the client announced (Content-Length), refused before a byte is stored where it cannot fit. */
  announcedBytes?: number;
  /** Sees every chunk as it arrives, before it is stored (an archive's gzip check); may throw to refuse the upload. */
  inspect?: (chunk: Buffer) => Promise<void> | void;
}

/** A stored object: its key, size and the SHA-256 of its bytes, computed as they streamed to storage. */
export interface PutResult {
  key: string;
  size: number;
  sha256: string;
}

const PREFIX: Record<StoredObjectKind, string> = { 'configuration-archive': 'archive', 'plan-json': 'plan' };

/** 413 naming the quota, what the organization holds and what this upload needed. */
export function quotaExceeded(quotaBytes: number, usedBytes: number): ApiError {
  return new ApiError(
    413,
    'storage quota exceeded',
    `The organization's archives and plans would take more than its storage quota of ${quotaBytes} bytes (STORAGE_QUOTA_BYTES); it holds ${usedBytes} bytes. Older runs' archives and plans are removed after STORAGE_RETENTION_DAYS, or an operator raises the quota.`,
    undefined,
    {},
    { 'quota-bytes': quotaBytes, 'used-bytes': usedBytes },
  );
}

/** The bytes an organization's stored objects take (those still being written count what they hold so far). */
export async function organizationUsage(pool: Pool, organizationId: string): Promise<number> {
  const { rows } = await pool.query<{ used: string }>(
    `select coalesce(sum(size), 0)::text as used from stored_objects where organization_id = $1`,
    [organizationId],
  );
  return Number(rows[0]?.used ?? 0);
}

/**
 * Streams `source` into storage under a new key: counted, hashed and checked as it arrives (more than
 * `maxBytes`, or past the quota, stops it there), so only the part being written is ever held. Where
 * anything fails (the limits, the inspection, the client going away, the store) nothing is left
 * stored and the error is rethrown; on success the object is complete and counted in its
 * organization's usage. The caller links the key to what it belongs to (and removes it if it cannot).
 */
export async function putObject(
  pool: Pool,
  store: ObjectStore,
  owner: ObjectOwner,
  source: AsyncIterable<Buffer>,
  limits: PutLimits,
): Promise<PutResult> {
  if (limits.announcedBytes !== undefined && limits.announcedBytes > limits.maxBytes) throw limits.tooLarge();
  const used = limits.quotaBytes > 0 ? await organizationUsage(pool, owner.organizationId) : 0;
  const overQuota = (bytes: number): boolean => limits.quotaBytes > 0 && used + bytes > limits.quotaBytes;
  if (overQuota(limits.announcedBytes ?? 0)) throw quotaExceeded(limits.quotaBytes, used);
  const key = `${PREFIX[owner.kind]}/${owner.workspaceId}/${randomUUID()}`;
  await pool.query(
    `insert into stored_objects (key, organization_id, workspace_id, kind, size, complete, created_at) values ($1, $2, $3, $4, 0, false, now())`,
    [key, owner.organizationId, owner.workspaceId, owner.kind],
  );
  const hash = createHash('sha256');
  let size = 0;
  async function* metered(): AsyncGenerator<Buffer> {
    for await (const chunk of source) {
      const bytes = chunk as Buffer;
      size += bytes.length;
      if (size > limits.maxBytes) throw limits.tooLarge();
      if (overQuota(size)) throw quotaExceeded(limits.quotaBytes, used);
      await limits.inspect?.(bytes);
      hash.update(bytes);
      yield bytes;
    }
  }
  try {
    await store.write(key, metered());
    const sha256 = hash.digest('hex');
    await pool.query(`update stored_objects set size = $2, sha256 = $3, complete = true where key = $1`, [key, size, sha256]);
    return { key, size, sha256 };
  } catch (error) {
    await removeObjects(pool, store, [key]).catch(() => undefined);
    throw error;
  }
}

/** A complete object's size and SHA-256, and its bytes as a stream; undefined where there is none under the key. */
export async function openObject(
  pool: Pool,
  store: ObjectStore,
  key: string,
): Promise<{ size: number; sha256: string; body: () => Readable } | undefined> {
  const { rows } = await pool.query<{ size: string; sha256: string }>(
    `select size::text as size, sha256 from stored_objects where key = $1 and complete`,
    [key],
  );
  const row = rows[0];
  if (!row) return undefined;
  return { size: Number(row.size), sha256: row.sha256, body: () => store.read(key) };
}

/** Removes the objects, bytes and metadata (what links to them is set to null by the foreign keys). */
export async function removeObjects(pool: Pool, store: ObjectStore, keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  await store.remove(keys);
  await pool.query(`delete from stored_objects where key = any($1::text[])`, [keys]);
}

/** A stored object's bytes read back whole: for the one place that must parse them (a plan report being taken, once). */
export async function readWhole(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** What the stored objects take per kind, whoever's (the storage_bytes and storage_objects metrics). */
export async function storageUsage(pool: Pool): Promise<{ kind: StoredObjectKind; bytes: number; objects: number }[]> {
  const { rows } = await pool.query<{ kind: StoredObjectKind; bytes: string; objects: string }>(
    `select kind, coalesce(sum(size), 0)::text as bytes, count(*)::text as objects from stored_objects group by kind`,
  );
  const found = new Map(rows.map((row) => [row.kind, row]));
  // Every kind, so a kind with nothing stored reads 0 rather than disappearing from the series.
  return STORED_OBJECT_KINDS.map((kind) => ({
    kind,
    bytes: Number(found.get(kind)?.bytes ?? 0),
    objects: Number(found.get(kind)?.objects ?? 0),
  }));
}
