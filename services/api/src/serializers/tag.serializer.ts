import { timestamp, toOne, type Resource } from '../http/jsonapi.ts';
import type { TagRow } from '../services/tag.service.ts';

/** A tag as HCP shows one, in organization tag lists and a workspace's tag list alike. */
export function serializeTag(row: TagRow): Resource {
  return {
    id: row.id,
    type: 'tags',
    attributes: {
      name: row.name,
      'created-at': timestamp(row.created_at),
      'instance-count': row.instance_count,
    },
    relationships: { organization: toOne('organizations', row.organization_name) },
  };
}
