import type { ConfigurationVersion } from '@runtasks/shared/db';
import { API_PREFIX, selfLink, type Resource } from '../http/jsonapi.ts';

/** `upload-url` only in the response that creates it: the URL's secret is stored hashed. */
export function serializeConfigurationVersion(version: ConfigurationVersion, uploadUrl: string | null = null): Resource {
  return {
    id: version.id,
    type: 'configuration-versions',
    attributes: {
      'auto-queue-runs': version.autoQueueRuns,
      error: version.status === 'errored' ? 'errored' : null,
      'error-message': version.errorMessage ?? null,
      source: 'tfe-api',
      speculative: version.speculative,
      provisional: version.provisional,
      status: version.status,
      'status-timestamps': version.statusTimestamps,
      'changed-files': [],
      'upload-url': uploadUrl,
    },
    relationships: { 'ingress-attributes': { data: null } },
    links: {
      ...selfLink(`/configuration-versions/${version.id}`),
      download: `${API_PREFIX}/configuration-versions/${version.id}/download`,
    },
  };
}
