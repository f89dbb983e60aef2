import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from './organization.entity.ts';
import { Workspace } from './workspace.entity.ts';

export const STORED_OBJECT_KINDS = ['configuration-archive', 'plan-json'] as const;
export type StoredObjectKind = (typeof STORED_OBJECT_KINDS)[number];

/**
 * A stored archive or plan JSON (shared/src/storage): its owner, size and SHA-256, whichever backend
 * holds its bytes. In PostgreSQL whatever the backend, so an organization's quota and the bytes-stored
 * metric are one query. `complete` is false while the bytes stream in: a row left incomplete is a
 * write that failed part way, and retention removes it. Goes with its workspace (and organization).
 */
const StoredObjectSchema = defineEntity({
  name: 'StoredObject',
  tableName: 'stored_objects',
  indexes: [{ name: 'stored_objects_organization_idx', properties: ['organization', 'complete'] }],
  properties: {
    key: p.text().primary(),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    workspace: () => p.manyToOne(Workspace).deleteRule('cascade').index('stored_objects_workspace_idx'),
    kind: p.text(),
    size: p.bigint('number').defaultRaw('0'),
    sha256: p.text().nullable(),
    complete: p.boolean().default(false),
    createdAt: p.datetime(),
  },
});

export class StoredObject extends StoredObjectSchema.class {}
StoredObjectSchema.setClass(StoredObject);

/** The bytes of an object stored in PostgreSQL (STORAGE_BACKEND=postgres), in order, a chunk a row. */
const StoredObjectChunkSchema = defineEntity({
  name: 'StoredObjectChunk',
  tableName: 'stored_object_chunks',
  properties: {
    object: () => p.manyToOne(StoredObject).primary().deleteRule('cascade'),
    seq: p.integer().primary(),
    data: p.type('blob'),
  },
});

export class StoredObjectChunk extends StoredObjectChunkSchema.class {}
StoredObjectChunkSchema.setClass(StoredObjectChunk);
