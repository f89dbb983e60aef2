/**
 * Where a run's WAL goes: the records PostgreSQL wrote between two positions, read back with
 * pg_walinspect (PostgreSQL 15 and later, a superuser or a role with pg_read_server_files), attributed
 * to this database's tables (an index's records to its table) and to record kinds (a heap insert, a HOT
 * update, a row lock, an index entry…). The WAL is the server's: records of other databases are left
 * out, and so are those that name no relation (commits, mostly), which the table reports as a total.
 * Tables truncated since (the benchmark truncates before each sample) have new files: records of their
 * old files, written before the truncation, are left out too.
 */
import type pg from 'pg';
import { round } from './stats.ts';

/** True when this server can read its WAL back here (creates the extension in this database). */
export async function walRecordsAvailable(db: pg.Client): Promise<boolean> {
  try {
    await db.query('create extension if not exists pg_walinspect');
    return true;
  } catch {
    return false;
  }
}

/**
 * Where the next WAL record will go: the insert position, which every record moves, where
 * `pg_current_wal_lsn()` (what has been written out of the WAL buffers) can stay put across an asynchronous
 * commit, leaving an empty range that pg_walinspect refuses.
 */
export async function currentLsn(db: pg.Client): Promise<string> {
  const { rows } = await db.query<{ lsn: string }>('select pg_current_wal_insert_lsn()::text as lsn');
  return rows[0]?.lsn ?? '0/0';
}

export interface WalShare {
  table: string;
  /** `heap` for the table's own pages, `index` for its indexes'. */
  part: 'heap' | 'index';
  kind: string;
  records: number;
  bytes: number;
  fpiBytes: number;
}

export interface WalRecords {
  shares: WalShare[];
  /** Bytes of this range's records that name no relation (commits, mostly: the whole server's). */
  unattributedBytes: number;
}

/**
 * pg_walinspect reads only WAL the server has flushed, and a range's end read by currentLsn is ahead of
 * that until the records before it are flushed (asynchronous commits, the WAL writer's pace). A transaction
 * that wrote a record and commits synchronously flushes the WAL up to its commit, past any position read
 * before it began. A transactional message is such a record, and names no table; taking an id alone is
 * not (PostgreSQL commits a transaction that wrote nothing asynchronously).
 */
async function flushWalPast(db: pg.Client): Promise<void> {
  await db.query('begin');
  try {
    await db.query('set local synchronous_commit = on');
    await db.query(`select pg_logical_emit_message(true, 'runtasks-bench', '')`);
    await db.query('commit');
  } catch (error) {
    await db.query('rollback');
    throw error;
  }
}

/** The WAL written from `from` to `to`, by table, part and record kind. */
export async function readWalRecords(db: pg.Client, from: string, to: string): Promise<WalRecords> {
  await flushWalPast(db);
  const { rows } = await db.query<{
    tbl: string | null;
    part: 'heap' | 'index';
    kind: string;
    records: string;
    bytes: string;
    fpi: string;
  }>(
    `with records as (
       select record_length, fpi_length, resource_manager || '/' || split_part(record_type, ' ', 1) as kind,
              regexp_match(block_ref, 'rel \\d+/(\\d+)/(\\d+)') as rel
         from pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)),
     ours as (
       select r.*, pg_filenode_relation(0, (r.rel)[2]::oid) as relation
         from records r
        where r.rel is not null and (r.rel)[1]::oid = (select oid from pg_database where datname = current_database()))
     select coalesce(i.indrelid, o.relation)::regclass::text as tbl, case when i.indrelid is null then 'heap' else 'index' end as part,
            o.kind, count(*) as records, sum(o.record_length) as bytes, sum(o.fpi_length) as fpi
       from ours o left join pg_index i on i.indexrelid = o.relation
      where o.relation is not null
      group by 1, 2, 3`,
    [from, to],
  );
  const { rows: total } = await db.query<{ bytes: string | null }>(
    `select sum(record_length) as bytes from pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) where coalesce(block_ref, '') = ''`,
    [from, to],
  );
  return {
    shares: rows
      .filter((row) => row.tbl !== null)
      .map((row) => ({
        table: row.tbl ?? '',
        part: row.part,
        kind: row.kind,
        records: Number(row.records),
        bytes: Number(row.bytes),
        fpiBytes: Number(row.fpi),
      })),
    unattributedBytes: Number(total[0]?.bytes ?? 0),
  };
}

/** Markdown tables: WAL per unit of work by table (heap and indexes; 10 bytes or more), then by record kind for the tables that write most. */
export function walTables(wal: WalRecords, units: number, unit: string, topTables = 8): string[] {
  const byTable = new Map<string, { heap: number; index: number; records: number; fpi: number }>();
  for (const share of wal.shares) {
    const entry = byTable.get(share.table) ?? { heap: 0, index: 0, records: 0, fpi: 0 };
    entry[share.part] += share.bytes;
    entry.records += share.records;
    entry.fpi += share.fpiBytes;
    byTable.set(share.table, entry);
  }
  const tables = [...byTable.entries()].sort((a, b) => b[1].heap + b[1].index - (a[1].heap + a[1].index));
  const attributed = tables.reduce((sum, [, entry]) => sum + entry.heap + entry.index, 0);
  const per = (bytes: number): string => String(round(bytes / units, 0));
  const lines = [
    `This database's tables: ${per(attributed)} bytes of WAL per ${unit} (full-page images included); records naming no relation, the whole server's (commits, mostly): ${per(wal.unattributedBytes)} per ${unit}.`,
    '',
    `| table (its indexes apart) | heap bytes per ${unit} | index bytes per ${unit} | records per ${unit} | of which full-page images, bytes |`,
    '|---|---:|---:|---:|---:|',
    ...tables
      .filter(([, entry]) => (entry.heap + entry.index) / units >= 10)
      .map(
        ([table, entry]) =>
          `| ${table} | ${per(entry.heap)} | ${per(entry.index)} | ${round(entry.records / units, 1)} | ${per(entry.fpi)} |`,
      ),
    '',
    `| table | part | record kind | records per ${unit} | bytes per ${unit} | bytes per record |`,
    '|---|---|---|---:|---:|---:|',
  ];
  for (const [table] of tables.slice(0, topTables)) {
    const shares = wal.shares.filter((share) => share.table === table && share.bytes / units >= 1).sort((a, b) => b.bytes - a.bytes);
    for (const share of shares)
      lines.push(
        `| ${table} | ${share.part} | ${share.kind} | ${round(share.records / units, 2)} | ${per(share.bytes)} | ${round(share.bytes / share.records, 0)} |`,
      );
  }
  lines.push('');
  return lines;
}
