import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from './organization.entity.ts';
import { Workspace } from './workspace.entity.ts';

/**
 * An organization's tag (HCP's organization tags): one name per organization, created the first time a
 * workspace is tagged with it and kept, unused or not, until the organization deletes it.
 */
const TagSchema = defineEntity({
  name: 'Tag',
  tableName: 'tags',
  uniques: [{ name: 'tags_organization_name_unique', properties: ['organization', 'name'] }],
  properties: {
    id: p.string().length(32).primary(),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    name: p.string().length(255),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});

export class Tag extends TagSchema.class {}
TagSchema.setClass(Tag);

/** A workspace's tag: the link goes with either side. */
const WorkspaceTagSchema = defineEntity({
  name: 'WorkspaceTag',
  tableName: 'workspace_tags',
  indexes: [{ name: 'workspace_tags_tag_idx', properties: ['tag'] }],
  properties: {
    workspace: () => p.manyToOne(Workspace).primary().deleteRule('cascade'),
    tag: () => p.manyToOne(Tag).primary().deleteRule('cascade'),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});

export class WorkspaceTag extends WorkspaceTagSchema.class {}
WorkspaceTagSchema.setClass(WorkspaceTag);
