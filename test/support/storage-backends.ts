import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import type { Harness } from './harness.ts';

/**
 * The object stores the storage tests run against (STORAGE_BACKEND): PostgreSQL, and a real
 * S3-compatible server, s3rver, started in this process on loopback over a temporary directory. What
 * the tests see through the API must be the same for both; `held` and `piecesOf` say what each keeps.
 */
export const STORAGE_BACKENDS = ['postgres', 's3'] as const;
export type StorageBackendName = (typeof STORAGE_BACKENDS)[number];

export interface StorageBackend {
  name: StorageBackendName;
  /** The harness's settings for it. */
  env: Record<string, string>;
  /** The pieces (chunk rows, or S3 objects) it holds for the organization's stored objects. */
  held(h: Harness, organization: string): Promise<number>;
  /** How many pieces an object of `bytes` takes. */
  piecesOf(bytes: number): number;
  /** The S3 object under `key` and its size, for the S3 backend (undefined where none). */
  objectSize?(key: string): Promise<number | undefined>;
  close(): Promise<void>;
}

const BUCKET = 'runtasks-test';
/** s3rver's own credentials: it checks every request's signature against them. */
const S3RVER_KEY = 'S3RVER';

async function workspacesOf(h: Harness, organization: string): Promise<string[]> {
  const rows = await h.orm.em
    .fork()
    .getConnection()
    .execute<{ id: string }[]>(`select w.id from workspaces w join organizations o on o.id = w.organization_id where o.name = ?`, [
      organization,
    ]);
  return rows.map((row) => row.id);
}

async function postgresBackend(): Promise<StorageBackend> {
  return {
    name: 'postgres',
    env: { STORAGE_BACKEND: 'postgres' },
    held: async (h, organization) => {
      const [row] = await h.orm.em
        .fork()
        .getConnection()
        .execute<{ chunks: string }[]>(
          `select count(*) as chunks from stored_object_chunks c join stored_objects o on o.key = c.object_key
             join organizations g on g.id = o.organization_id where g.name = ?`,
          [organization],
        );
      return Number(row?.chunks);
    },
    piecesOf: (bytes) => Math.ceil(bytes / (256 * 1024)),
    close: async () => undefined,
  };
}

async function s3Backend(): Promise<StorageBackend> {
  const directory = mkdtempSync(join(tmpdir(), 'runtasks-s3rver-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: BUCKET, configs: [] }] });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  // The AWS SDK's default chain reads them, as in production (Jest gives each test file its own process.env).
  process.env['AWS_ACCESS_KEY_ID'] = S3RVER_KEY;
  process.env['AWS_SECRET_ACCESS_KEY'] = S3RVER_KEY;
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: S3RVER_KEY, secretAccessKey: S3RVER_KEY },
  });
  /** Every key under `prefix`. */
  const keysUnder = async (prefix: string): Promise<{ key: string; size: number }[]> => {
    const found: { key: string; size: number }[] = [];
    let token: string | undefined;
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix, ContinuationToken: token }));
      for (const item of page.Contents ?? []) found.push({ key: item.Key ?? '', size: item.Size ?? 0 });
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return found;
  };
  return {
    name: 's3',
    env: { STORAGE_BACKEND: 's3', S3_BUCKET: BUCKET, S3_ENDPOINT: endpoint, S3_REGION: 'us-east-1', S3_FORCE_PATH_STYLE: 'true' },
    held: async (h, organization) => {
      let count = 0;
      for (const workspace of await workspacesOf(h, organization)) {
        for (const kind of ['archive', 'plan']) count += (await keysUnder(`${kind}/${workspace}/`)).length;
      }
      return count;
    },
    piecesOf: () => 1,
    objectSize: async (key) => (await keysUnder(key)).find((item) => item.key === key)?.size,
    close: async () => {
      client.destroy();
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

export function startStorageBackend(name: StorageBackendName): Promise<StorageBackend> {
  return name === 's3' ? s3Backend() : postgresBackend();
}
