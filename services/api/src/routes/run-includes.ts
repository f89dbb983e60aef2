import { ConfigurationVersion, Organization, TaskResult, TaskStage, type Run } from '@runtasks/shared/db';
import { RUN_STAGES } from '@runtasks/shared/domain';
import { workspacePermissions, workspaceRights } from '../auth/permissions.ts';
import { workspaceGrants } from '../auth/workspace-grants.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { uniqueResources, type Resource } from '../http/jsonapi.ts';
import { serializeConfigurationVersion } from '../serializers/configuration-version.serializer.ts';
import { serializeApply, serializePlan } from '../serializers/execution.serializer.ts';
import { serializeTaskStage } from '../serializers/task-stage.serializer.ts';
import { serializeWorkspace } from '../serializers/workspace.serializer.ts';
import { tagNamesOf } from '../services/tag.service.ts';
import { canOverrideTasks } from '../services/run-lookup.service.ts';
import { includedActors } from './actor-includes.ts';

/** What `include` may name on a run and on run lists (HCP's list, less cost estimates). */
export const RUN_INCLUDES = ['task_stages', 'plan', 'apply', 'workspace', 'created_by', 'configuration_version'] as const;
export type RunInclude = (typeof RUN_INCLUDES)[number];

const stageOrder = (stage: TaskStage): number => RUN_STAGES.indexOf(stage.stage);

export async function stagesOf(ctx: ApiContext, runs: readonly Run[]): Promise<Map<string, TaskStage[]>> {
  const stages = runs.length === 0 ? [] : await ctx.state.em.find(TaskStage, { run: { $in: runs.map((run) => run.id) } });
  const byRun = new Map<string, TaskStage[]>();
  for (const stage of stages.sort((a, b) => stageOrder(a) - stageOrder(b))) {
    byRun.set(stage.run.id, [...(byRun.get(stage.run.id) ?? []), stage]);
  }
  return byRun;
}

/** The task stages of these runs as included resources, with their results' ids: one query for all of them. */
async function includedStages(ctx: ApiContext, runs: readonly Run[], stagesByRun: ReadonlyMap<string, TaskStage[]>): Promise<Resource[]> {
  const stages = runs.flatMap((run) => stagesByRun.get(run.id) ?? []);
  if (stages.length === 0) return [];
  const results = await ctx.state.em.find(
    TaskResult,
    { taskStage: { $in: stages.map((stage) => stage.id) } },
    { fields: ['id', 'taskStage'], orderBy: { createdAt: 'asc', id: 'asc' } },
  );
  const resultIds = new Map<string, string[]>();
  for (const result of results) resultIds.set(result.taskStage.id, [...(resultIds.get(result.taskStage.id) ?? []), result.id]);
  return runs.flatMap((run) => {
    const permissions = { canOverrideTasks: canOverrideTasks(ctx.state.principal, run.organization.id) };
    return (stagesByRun.get(run.id) ?? []).map((stage) => serializeTaskStage(stage, resultIds.get(stage.id) ?? [], permissions));
  });
}

/** The runs' workspaces with the caller's permissions on each (as a workspace's own document has them): one query for the grants. */
async function includedWorkspaces(ctx: ApiContext, runs: readonly Run[]): Promise<Resource[]> {
  if (runs.length === 0) return [];
  const organizationIds = [...new Set(runs.map((run) => run.organization.id))];
  const organizations = await ctx.state.em.find(Organization, { id: { $in: organizationIds } }, { fields: ['id', 'name'] });
  const names = new Map(organizations.map((organization) => [organization.id, organization.name]));
  const workspaceIds = [...new Set(runs.map((run) => run.workspace.id))];
  const grants = await workspaceGrants(ctx.state.em, ctx.state.principal, workspaceIds);
  const tagNames = await tagNamesOf(await poolOf(ctx), workspaceIds);
  return runs.map((run) => {
    const rights = workspaceRights(ctx.state.principal, run.organization.id, grants.get(run.workspace.id) ?? null);
    return serializeWorkspace(
      run.workspace,
      names.get(run.organization.id) ?? '',
      tagNames.get(run.workspace.id) ?? [],
      workspacePermissions(rights),
    );
  });
}

async function includedConfigurationVersions(ctx: ApiContext, runs: readonly Run[]): Promise<Resource[]> {
  const ids = [...new Set(runs.flatMap((run) => (run.configurationVersionId ? [run.configurationVersionId] : [])))];
  if (ids.length === 0) return [];
  const versions = await ctx.state.em.find(ConfigurationVersion, { id: { $in: ids } }, { orderBy: { id: 'asc' } });
  return versions.map((version) => serializeConfigurationVersion(version));
}

/** Every resource `include` asks for, once each, for these runs (whose workspaces are populated). */
export async function includedForRuns(
  ctx: ApiContext,
  include: ReadonlySet<RunInclude>,
  runs: readonly Run[],
  stagesByRun: ReadonlyMap<string, TaskStage[]>,
): Promise<Resource[]> {
  return uniqueResources([
    ...(include.has('task_stages') ? await includedStages(ctx, runs, stagesByRun) : []),
    ...(include.has('plan') ? runs.map(serializePlan) : []),
    ...(include.has('apply') ? runs.map(serializeApply) : []),
    ...(include.has('workspace') ? await includedWorkspaces(ctx, runs) : []),
    ...(include.has('created_by')
      ? await includedActors(
          ctx,
          runs.map((run) => run.createdBy),
        )
      : []),
    ...(include.has('configuration_version') ? await includedConfigurationVersions(ctx, runs) : []),
  ]);
}
