import { defineEntity, p } from '@mikro-orm/core';
import { StoredObject } from './stored-object.entity.ts';
import { Workspace } from './workspace.entity.ts';

export const CONFIGURATION_VERSION_STATUSES = ['pending', 'uploaded', 'errored', 'archived'] as const;

const ConfigurationVersionSchema = defineEntity({
  name: 'ConfigurationVersion',
  tableName: 'configuration_versions',
  indexes: [{ name: 'configuration_versions_workspace_created_idx', properties: ['workspace', 'createdAt'] }],
  properties: {
    id: p.string().length(32).primary(),
    workspace: () => p.manyToOne(Workspace).deleteRule('cascade'),
    status: p.enum(CONFIGURATION_VERSION_STATUSES).default('pending'),
    statusTimestamps: p
      .json<Record<string, string>>()
      .defaultRaw(`'{}'`)
      .onCreate(() => ({})),
    errorMessage: p.text().nullable(),
    autoQueueRuns: p.boolean().default(true),
    speculative: p.boolean().default(false),
    // Not the workspace's current configuration until a run that uses it is applied (HCP's provisional).
    provisional: p.boolean().default(false),
    // The upload URL's secret, hashed; cleared once used, so the URL works once.
    uploadTokenHash: p.string().length(64).nullable().unique(),
    uploadExpiresAt: p.datetime().nullable(),
    // The archive's stored object (shared/src/storage); null before an upload, and once retention removed it.
    archive: () => p.manyToOne(StoredObject).nullable().deleteRule('set null').index('configuration_versions_archive_idx'),
    archiveSize: p.integer().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class ConfigurationVersion extends ConfigurationVersionSchema.class {}
ConfigurationVersionSchema.setClass(ConfigurationVersion);
