import { conflict } from '@runtasks/shared/errors';
import { DB_NOW_ISO } from '@runtasks/shared/db';
import { FINAL_RUN_STATUSES } from '@runtasks/shared/domain';
import { z } from 'zod';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { findVersion } from '../services/configuration-version-lookup.ts';
import { discardObjects } from '../services/stored-object.service.ts';
import { respond, type RouteDef } from './define.ts';
import { safeText } from './schemas.ts';

// As JSON: the query builder would spread an array into one placeholder per value.
const FINAL = JSON.stringify([...FINAL_RUN_STATUSES]);

/**
 * The workspace's current configuration version: its newest uploaded version that is not provisional.
 * A run queued without a configuration version would use it, so it is never archived.
 */
const IS_CURRENT_SQL = `not exists (
  select 1 from configuration_versions newer
   where newer.workspace_id = cv.workspace_id and newer.status = 'uploaded' and not newer.provisional
     and (newer.created_at, newer.id) > (cv.created_at, cv.id))`;

// HCP's archive takes no body. A comment is taken as on the other actions here (validated, not kept),
// so the actions of this API all accept the same optional body.
const archiveSchema = z.object({ comment: safeText(10_000).nullable().optional() }).optional();

const IN_USE_SQL = `exists (select 1 from runs where runs.configuration_version_id = cv.id and runs.status not in (select jsonb_array_elements_text(?::jsonb)))`;

/**
 * Archives a configuration version as HCP does: its archive is dropped (it cannot be downloaded or used
 * by a new run again) and its status becomes `archived`. Only an uploaded version that is not the
 * workspace's current one and that no unfinished run uses; otherwise 409 `transition not allowed` with
 * HCP's reason. One conditional update, so a version that changes meanwhile is refused, never half-archived.
 */
async function archive(ctx: ApiContext): Promise<void> {
  parseWith(archiveSchema, ctx.request.body);
  const version = await findVersion(ctx, 'runs:plan');
  const em = ctx.state.em;
  const [facts] = await em.execute<{ current: boolean; in_use: boolean }[]>(
    `select ${IS_CURRENT_SQL} as current, ${IN_USE_SQL} as in_use from configuration_versions cv where cv.id = ?`,
    [FINAL, version.id],
  );
  const reason =
    version.status !== 'uploaded'
      ? `it is ${version.status}`
      : !version.provisional && facts?.current
        ? 'it is current'
        : facts?.in_use
          ? 'it is in use by a run'
          : null;
  if (reason) throw conflict(`The configuration could not be archived because ${reason}.`, 'transition not allowed');
  const updated = await em.execute(
    `update configuration_versions cv set status = 'archived', archive_key = null, upload_token_hash = null, updated_at = now(),
            status_timestamps = cv.status_timestamps || jsonb_build_object('archived-at', ${DB_NOW_ISO})
      where cv.id = ? and cv.status = 'uploaded' and (cv.provisional or ${IS_CURRENT_SQL.replace('not exists', 'exists')})
        and not ${IN_USE_SQL}`,
    [version.id, FINAL],
    'run',
  );
  if ((updated as { affectedRows?: number }).affectedRows === 0)
    throw conflict('The configuration version changed concurrently and could not be archived.', 'transition not allowed');
  // Its bytes go with it (stored apart: the update above only unlinked them).
  await discardObjects(ctx, [version.archive?.key]);
  // HCP answers with 202 Accepted and no body; the version reads `archived` from now on.
  respond(ctx, 202);
}

export const configurationVersionActionRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/configuration-versions/:configuration_version_id/actions/archive',
    auth: 'token',
    summary: "Archive a configuration version (drops its archive; not the workspace's current one, nor one an unfinished run uses)",
    requestSchema: archiveSchema,
    optionalBody: true,
    response: { status: 202, content: 'none' },
    handler: archive,
  },
];
