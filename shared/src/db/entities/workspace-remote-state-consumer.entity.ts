import { defineEntity, p } from '@mikro-orm/core';
import { Workspace } from './workspace.entity.ts';

/**
 * A workspace allowed to read another's state (HCP's remote state consumers): `workspace` shares its
 * state with `consumer`, both of one organization. Either workspace's deletion removes the link. The
 * service keeps no state versions, so nothing reads state through it: the list is kept and served.
 */
const WorkspaceRemoteStateConsumerSchema = defineEntity({
  name: 'WorkspaceRemoteStateConsumer',
  tableName: 'workspace_remote_state_consumers',
  indexes: [{ name: 'workspace_remote_state_consumers_consumer_idx', properties: ['consumer'] }],
  properties: {
    workspace: () => p.manyToOne(Workspace).primary().deleteRule('cascade'),
    consumer: () => p.manyToOne(Workspace).primary().deleteRule('cascade'),
  },
});

export class WorkspaceRemoteStateConsumer extends WorkspaceRemoteStateConsumerSchema.class {}
WorkspaceRemoteStateConsumerSchema.setClass(WorkspaceRemoteStateConsumer);
