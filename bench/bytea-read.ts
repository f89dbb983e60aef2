/**
 * `npm run bench:bytea-read`: what reading one stored chunk (256 KiB of random bytes, as
 * stored_object_chunks holds them) costs the Node process, by each way node-postgres can read it.
 * Each way reads the same chunks, in rounds that alternate the ways, and must give back every byte:
 *
 * - `hex`: `select data` (bytea in text format: hex, decoded by node-postgres on the event loop);
 * - `base64`: `select encode(data, 'base64')`, decoded with Buffer.from;
 * - `pg binary`: `select data` with node-postgres's `binary: true` (counted as wrong where it mangles bytes);
 * - `copy binary`: `COPY (select data …) TO STDOUT (FORMAT binary)` (shared/src/storage/binary-copy.ts).
 *
 * Prints CPU and wall time per chunk for each way; uses its own scratch database
 * (`<BENCH_DATABASE>_bytea`), dropped at the end.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { copyOutOneValue } from '@runtasks/shared/storage';
import { DATABASE_NAME, POSTGRES_URL } from './lib/env.ts';

const CHUNK_BYTES = 256 * 1024;
const CHUNKS = 32;
const ROUNDS = 3;
const REPEATS = 4;
const scratch = `${DATABASE_NAME}_bytea`;

const admin = new pg.Client({ connectionString: `${POSTGRES_URL}/postgres` });
await admin.connect();
await admin.query(`drop database if exists ${admin.escapeIdentifier(scratch)} with (force)`);
await admin.query(`create database ${admin.escapeIdentifier(scratch)}`);
const pool = new pg.Pool({ connectionString: `${POSTGRES_URL}/${scratch}`, max: 2 });

type Read = (seq: number) => Promise<Buffer | undefined>;
const ways: Record<string, Read> = {
  hex: async (seq) => (await pool.query<{ data: Buffer }>('select data from chunks where seq = $1', [seq])).rows[0]?.data,
  base64: async (seq) => {
    const row = (await pool.query<{ data: string }>(`select encode(data, 'base64') as data from chunks where seq = $1`, [seq])).rows[0];
    return row && Buffer.from(row.data, 'base64');
  },
  'pg binary': async (seq) => {
    // `binary` is a query option @types/pg does not declare.
    const config = { text: 'select data from chunks where seq = $1', values: [seq], binary: true } as pg.QueryConfig;
    const { rows } = await pool.query<{ data: Buffer }>(config);
    return rows[0]?.data;
  },
  'copy binary': (seq) => copyOutOneValue(pool, () => `select data from chunks where seq = ${String(seq)}`),
};

try {
  await pool.query('create table chunks (seq int primary key, data bytea not null)');
  const stored: Buffer[] = [];
  for (let seq = 0; seq < CHUNKS; seq += 1) {
    const bytes = randomBytes(CHUNK_BYTES);
    stored.push(bytes);
    await pool.query('insert into chunks (seq, data) values ($1, $2)', [seq, bytes]);
  }
  const totals = new Map<string, { cpuMs: number; wallMs: number; reads: number; wrong: number }>();
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const [name, read] of Object.entries(ways)) {
      const total = totals.get(name) ?? { cpuMs: 0, wallMs: 0, reads: 0, wrong: 0 };
      const cpu = process.cpuUsage();
      const started = performance.now();
      for (let repeat = 0; repeat < REPEATS; repeat += 1) {
        for (let seq = 0; seq < CHUNKS; seq += 1) {
          const bytes = await read(seq);
          total.reads += 1;
          if (!Buffer.isBuffer(bytes) || !bytes.equals(stored[seq] as Buffer)) total.wrong += 1;
        }
      }
      const used = process.cpuUsage(cpu);
      total.wallMs += performance.now() - started;
      total.cpuMs += (used.user + used.system) / 1000;
      totals.set(name, total);
    }
  }
  process.stdout.write(`| ${CHUNK_BYTES / 1024} KiB chunk read as | Node CPU per chunk | wall per chunk | reads with wrong bytes |\n`);
  process.stdout.write('| --- | --- | --- | --- |\n');
  for (const [name, total] of totals) {
    process.stdout.write(
      `| ${name} | ${(total.cpuMs / total.reads).toFixed(2)} ms | ${(total.wallMs / total.reads).toFixed(2)} ms | ${total.wrong} of ${total.reads} |\n`,
    );
  }
} finally {
  await pool.end();
  await admin.query(`drop database if exists ${admin.escapeIdentifier(scratch)} with (force)`);
  await admin.end();
}
