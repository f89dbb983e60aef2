// Stored objects (configuration archives, reported plans): one interface, PostgreSQL or S3 behind it.
import type { Pool } from 'pg';
import type { StorageConfig } from '../config.ts';
import type { ObjectStore } from './object-store.ts';
import { PostgresObjectStore } from './postgres-store.ts';
import { S3ObjectStore } from './s3-store.ts';

export * from './object-store.ts';
export * from './objects.ts';
export { PostgresObjectStore, POSTGRES_CHUNK_BYTES } from './postgres-store.ts';
export { copyOutOneValue } from './binary-copy.ts';
export { S3ObjectStore, S3_PART_BYTES, type S3Settings } from './s3-store.ts';

const postgresStores = new WeakMap<Pool, ObjectStore>();
const s3Stores = new WeakMap<StorageConfig, S3ObjectStore>();

/**
 * The process's object store, the one STORAGE_BACKEND names, made once: PostgreSQL over `pool`, or
 * the bucket of `storage` (one S3 client, and so one set of connections, per configuration).
 */
export function objectStoreFor(pool: Pool, storage: StorageConfig): ObjectStore {
  if (storage.backend === 's3') return s3StoreFor(storage);
  let store = postgresStores.get(pool);
  if (!store) {
    store = new PostgresObjectStore(pool);
    postgresStores.set(pool, store);
  }
  return store;
}

/** The bucket's store of STORAGE_BACKEND=s3 (readiness asks it whether the bucket answers). */
export function s3StoreFor(storage: StorageConfig): S3ObjectStore {
  if (!storage.s3) throw new Error('STORAGE_BACKEND=s3 needs S3_BUCKET');
  let store = s3Stores.get(storage);
  if (!store) {
    store = new S3ObjectStore(storage.s3);
    s3Stores.set(storage, store);
  }
  return store;
}

/**
 * The readiness check of the object store, keyed `storage`: with STORAGE_BACKEND=s3, that the bucket
 * answers (HeadBucket), naming it; none for postgres, whose check is PostgreSQL's own.
 */
export function storageReadinessCheck(storage: StorageConfig): { storage?: () => Promise<Record<string, string>> } {
  if (storage.backend !== 's3') return {};
  return {
    storage: async () => {
      await s3StoreFor(storage).check();
      return { backend: 's3', bucket: storage.s3?.bucket ?? '' };
    },
  };
}
export { removeExpiredObjects } from './retention.ts';
