import { defineEntity, p } from '@mikro-orm/core';
import type { ExecutionMode } from '../../domain/statuses.ts';
import { Organization } from './organization.entity.ts';
import { TeamWorkspace } from './team-workspace.entity.ts';

const WorkspaceSchema = defineEntity({
  name: 'Workspace',
  tableName: 'workspaces',
  uniques: [{ name: 'workspaces_organization_name_unique', properties: ['organization', 'name'] }],
  properties: {
    id: p.string().length(32).primary(),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    name: p.string().length(90),
    description: p.text().nullable(),
    autoApply: p.boolean().default(false),
    workingDirectory: p.text().default(''),
    terraformVersion: p.string().length(32).default('1.9.0'),
    // `local`: the user's pipeline runs Terraform and reports each plan and apply.
    executionMode: p.text().$type<ExecutionMode>().default('remote'),
    // A person's lock (actions/lock): who holds it (`teams` or `users`, and the id) and why. A run's hold is its `queue_state`.
    lockKind: p.text().$type<'teams' | 'users'>().nullable(),
    lockOwnerId: p.text().nullable(),
    lockReason: p.text().nullable(),
    // HCP's workspace settings, stored as given and returned (docs/go-tfe.md, "Workspaces").
    allowDestroyPlan: p.boolean().default(true),
    assessmentsEnabled: p.boolean().default(false),
    autoApplyRunTrigger: p.boolean().default(false),
    autoDestroyAt: p.datetime().nullable(),
    autoDestroyActivityDuration: p.text().nullable(),
    inheritsProjectAutoDestroy: p.boolean().default(true),
    fileTriggersEnabled: p.boolean().default(true),
    globalRemoteState: p.boolean().default(false),
    queueAllRuns: p.boolean().default(false),
    speculativeEnabled: p.boolean().default(true),
    structuredRunOutputEnabled: p.boolean().default(true),
    sourceName: p.text().nullable(),
    sourceUrl: p.text().nullable(),
    triggerPrefixes: p
      .json<string[]>()
      .defaultRaw(`'[]'`)
      .onCreate(() => []),
    triggerPatterns: p
      .json<string[]>()
      .defaultRaw(`'[]'`)
      .onCreate(() => []),
    overwritesExecutionMode: p.boolean().default(false),
    overwritesAgentPool: p.boolean().default(false),
    // Inverse side only (no column): lets permission filters join team access in the same query.
    teamAccess: () => p.oneToMany(TeamWorkspace).mappedBy('workspace'),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class Workspace extends WorkspaceSchema.class {}
WorkspaceSchema.setClass(Workspace);
