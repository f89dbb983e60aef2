import { Run, TaskStage, type Workspace } from '@runtasks/shared/db';
import { workspaceLockStates } from '@runtasks/shared/engine';
import { runPermissions, workspacePermissions, workspaceRights, type WorkspaceRights } from '../auth/permissions.ts';
import { workspaceGrants } from '../auth/workspace-grants.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseInclude } from '../http/include.ts';
import type { Resource } from '../http/jsonapi.ts';
import { serializeOrganization } from '../serializers/organization.serializer.ts';
import { serializeRun } from '../serializers/run.serializer.ts';
import { serializeWorkspace } from '../serializers/workspace.serializer.ts';
import { workspaceFacts, type WorkspaceFacts } from '../services/workspace-facts.ts';
import { tagNamesOf } from '../services/tag.service.ts';

/** The includes a workspace document serves (list and show). */
export const WORKSPACE_INCLUDES = ['organization', 'current_run', 'latest_run'] as const;
export type WorkspaceInclude = (typeof WORKSPACE_INCLUDES)[number];

export const parseWorkspaceIncludes = (ctx: ApiContext): Set<WorkspaceInclude> =>
  parseInclude(ctx.query as Record<string, string | string[] | undefined>, WORKSPACE_INCLUDES);

export interface WorkspaceDocuments {
  data: Resource[];
  included: Resource[];
}

/** The runs a page of workspaces names (current or latest), with their task stages and the caller's rights on each. */
async function includedRuns(ctx: ApiContext, runIds: ReadonlyMap<string, WorkspaceRights>): Promise<Resource[]> {
  if (runIds.size === 0) return [];
  const ids = [...runIds.keys()];
  const runs = await ctx.state.em.find(Run, { id: { $in: ids } }, { orderBy: { createdAt: 'asc', id: 'asc' } });
  const stages = await ctx.state.em.find(TaskStage, { run: { $in: ids } }, { orderBy: { createdAt: 'asc', id: 'asc' } });
  return runs.map((run) => {
    const stageIds = stages.filter((stage) => stage.run.id === run.id).map((stage) => stage.id);
    return serializeRun(run, stageIds, runPermissions(runIds.get(run.id)?.runs === 'apply'));
  });
}

function includedOrganizations(workspaces: readonly Workspace[]): Resource[] {
  const seen = new Map(workspaces.map((workspace) => [workspace.organization.id, workspace.organization]));
  return [...seen.values()].map((organization) => serializeOrganization(organization));
}

function runsToInclude(
  workspaces: readonly Workspace[],
  facts: ReadonlyMap<string, WorkspaceFacts>,
  rights: ReadonlyMap<string, WorkspaceRights>,
  include: ReadonlySet<WorkspaceInclude>,
): Map<string, WorkspaceRights> {
  const runs = new Map<string, WorkspaceRights>();
  for (const workspace of workspaces) {
    const workspaceFacts = facts.get(workspace.id);
    const workspaceRights = rights.get(workspace.id);
    if (!workspaceFacts || !workspaceRights) continue;
    if (include.has('current_run') && workspaceFacts.currentRunId) runs.set(workspaceFacts.currentRunId, workspaceRights);
    if (include.has('latest_run') && workspaceFacts.latestRunId) runs.set(workspaceFacts.latestRunId, workspaceRights);
  }
  return runs;
}

/**
 * Workspaces with the caller's permissions on each, their run facts and what `include` asks for: a
 * fixed number of queries for the whole page, whatever its size.
 */
export async function workspaceDocuments(
  ctx: ApiContext,
  workspaces: readonly Workspace[],
  include: ReadonlySet<WorkspaceInclude> = new Set(),
): Promise<WorkspaceDocuments> {
  const principal = ctx.state.principal;
  const ids = workspaces.map((workspace) => workspace.id);
  const grants = await workspaceGrants(ctx.state.em, principal, ids);
  const facts = await workspaceFacts(await poolOf(ctx), ids);
  const locks = await workspaceLockStates(await poolOf(ctx), ids);
  const tagNames = await tagNamesOf(await poolOf(ctx), ids);
  const rights = new Map(
    workspaces.map((workspace) => [workspace.id, workspaceRights(principal, workspace.organization.id, grants.get(workspace.id) ?? null)]),
  );
  const data = workspaces.map((workspace) =>
    serializeWorkspace(
      workspace,
      workspace.organization.name,
      tagNames.get(workspace.id) ?? [],
      workspacePermissions(rights.get(workspace.id)!),
      facts.get(workspace.id),
      locks.get(workspace.id),
    ),
  );
  const included = [
    ...(include.has('organization') ? includedOrganizations(workspaces) : []),
    ...(await includedRuns(ctx, runsToInclude(workspaces, facts, rights, include))),
  ];
  return { data, included };
}
