import type { ConfigurationVersion } from '@runtasks/shared/db';
import { ApiError } from '@runtasks/shared/errors';
import type { PutResult } from '@runtasks/shared/storage';
import type { ApiContext } from '../context.ts';
import { ArchiveInspector, type ArchiveCheck } from './configuration-version.service.ts';
import { storeRequestBody } from './stored-object.service.ts';

const ARCHIVE_LIMIT = { what: 'The configuration archive', setting: 'CONFIGURATION_VERSION_MAX_BYTES' };

/**
 * A configuration archive's upload, streamed into storage and checked as it arrives (ArchiveInspector):
 * what the check found, and the stored archive. A body that is not gzip is refused at its first bytes
 * (422, nothing stored); one past CONFIGURATION_VERSION_MAX_BYTES or the organization's quota at the
 * byte that passes it (413, nothing stored).
 */
export async function receiveArchive(ctx: ApiContext, version: ConfigurationVersion): Promise<{ check: ArchiveCheck; archive: PutResult }> {
  const maxBytes = ctx.deps.config.configurationVersionMaxBytes;
  const inspector = new ArchiveInspector(maxBytes);
  const owner = {
    organizationId: version.workspace.organization.id,
    workspaceId: version.workspace.id,
    kind: 'configuration-archive' as const,
  };
  const archive = await storeRequestBody(ctx, owner, maxBytes, ARCHIVE_LIMIT, async (chunk) => {
    const refused = await inspector.push(chunk);
    if (refused && !refused.ok) throw new ApiError(refused.status, 'invalid archive', refused.detail);
  });
  return { check: await inspector.finish(), archive };
}
