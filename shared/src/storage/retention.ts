import type { Pool } from 'pg';
import { FINAL_RUN_STATUSES } from '../domain/index.ts';
import type { ObjectStore } from './object-store.ts';
import { removeObjects } from './objects.ts';

/** How long a write may stay incomplete before it counts as one a process died in the middle of. */
const INCOMPLETE_MS = 86_400_000;

/**
 * One bounded pass of retention (the worker's sweep runs it): removes writes left incomplete for a day,
 * and, where `retentionMs` is set (STORAGE_RETENTION_DAYS), the plans of finished runs and the archives
 * of configuration versions whose runs have all finished, stored longer ago than that. What linked to
 * them reads null, and the API answers 410 for them. Returns how many objects it removed.
 */
export async function removeExpiredObjects(pool: Pool, store: ObjectStore, retentionMs: number, batch = 100): Promise<number> {
  const { rows } = await pool.query<{ key: string }>(
    `select key from stored_objects where not complete and created_at < now() - make_interval(secs => $1::float8 / 1000)
     union all
     (select o.key from stored_objects o
       where $2::bigint > 0 and o.complete and o.created_at < now() - make_interval(secs => $2::float8 / 1000)
         and (exists (select 1 from runs r where r.plan_object_key = o.key and r.status = any($3::text[]))
           or exists (select 1 from configuration_versions cv where cv.archive_key = o.key
                        and exists (select 1 from runs r where r.configuration_version_id = cv.id)
                        and not exists (select 1 from runs r where r.configuration_version_id = cv.id and r.status <> all($3::text[])))))
     limit $4`,
    [INCOMPLETE_MS, retentionMs, [...FINAL_RUN_STATUSES], batch],
  );
  const keys = rows.map((row) => row.key);
  await removeObjects(pool, store, keys);
  return keys.length;
}
