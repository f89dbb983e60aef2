import { defineEntity, p } from '@mikro-orm/core';
import { TEAM_RUNS_ACCESS, TEAM_WORKSPACE_ACCESS } from '../../domain/statuses.ts';
import type { TeamSentinelMocksAccess, TeamStateVersionsAccess, TeamVariablesAccess } from '../../domain/team-access.ts';
import { Team } from './team.entity.ts';
import { Workspace } from './workspace.entity.ts';

const TeamWorkspaceSchema = defineEntity({
  name: 'TeamWorkspace',
  tableName: 'team_workspaces',
  uniques: [{ name: 'team_workspaces_team_workspace_unique', properties: ['team', 'workspace'] }],
  indexes: [{ name: 'team_workspaces_workspace_idx', properties: ['workspace'] }],
  properties: {
    id: p.string().length(32).primary(),
    team: () => p.manyToOne(Team).deleteRule('cascade'),
    workspace: () => p.manyToOne(Workspace).deleteRule('cascade'),
    access: p.enum(TEAM_WORKSPACE_ACCESS).default('custom'),
    runs: p.enum(TEAM_RUNS_ACCESS).default('read'),
    runTasks: p.boolean().default(false),
    // HCP's other custom permissions: stored and shown; workspace-locking is the one with a feature here.
    variables: p.text().$type<TeamVariablesAccess>().default('none'),
    stateVersions: p.text().$type<TeamStateVersionsAccess>().default('none'),
    sentinelMocks: p.text().$type<TeamSentinelMocksAccess>().default('none'),
    workspaceLocking: p.boolean().default(false),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class TeamWorkspace extends TeamWorkspaceSchema.class {}
TeamWorkspaceSchema.setClass(TeamWorkspace);
