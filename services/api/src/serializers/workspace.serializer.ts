import type { Workspace } from '@runtasks/shared/db';
import { lockedBy, type LockState } from '@runtasks/shared/domain';
import type { Permissions } from '../auth/permissions.ts';
import { selfLink, timestamp, toOne, type Resource } from '../http/jsonapi.ts';
import type { WorkspaceFacts } from '../services/workspace-facts.ts';

/** The settings a client sets, as HCP names them. */
function settingAttributes(workspace: Workspace): Record<string, unknown> {
  return {
    name: workspace.name,
    description: workspace.description ?? null,
    'auto-apply': workspace.autoApply,
    'working-directory': workspace.workingDirectory,
    'terraform-version': workspace.terraformVersion,
    'execution-mode': workspace.executionMode,
    operations: workspace.executionMode === 'remote',
    'allow-destroy-plan': workspace.allowDestroyPlan,
    'assessments-enabled': workspace.assessmentsEnabled,
    'auto-apply-run-trigger': workspace.autoApplyRunTrigger,
    'auto-destroy-at': timestamp(workspace.autoDestroyAt),
    'auto-destroy-activity-duration': workspace.autoDestroyActivityDuration ?? null,
    'inherits-project-auto-destroy': workspace.inheritsProjectAutoDestroy,
    'file-triggers-enabled': workspace.fileTriggersEnabled,
    'global-remote-state': workspace.globalRemoteState,
    'queue-all-runs': workspace.queueAllRuns,
    'speculative-enabled': workspace.speculativeEnabled,
    'structured-run-output-enabled': workspace.structuredRunOutputEnabled,
    'source-name': workspace.sourceName ?? null,
    'source-url': workspace.sourceUrl ?? null,
    'trigger-prefixes': workspace.triggerPrefixes,
    'trigger-patterns': workspace.triggerPatterns,
    'setting-overwrites': { 'execution-mode': workspace.overwritesExecutionMode, 'agent-pool': workspace.overwritesAgentPool },
    'vcs-repo': null,
  };
}

/**
 * What HCP computes: nothing here manages resources (there are no state versions), so every
 * workspace is destroyable and safe to delete, and counts of resources and policy checks are zero.
 */
function readOnlyAttributes(workspace: Workspace, tagNames: readonly string[]): Record<string, unknown> {
  return {
    actions: { 'is-destroyable': true },
    'can-queue-destroy-plan': workspace.allowDestroyPlan,
    environment: 'default',
    'no-code-upgrade-available': false,
    'resource-count': 0,
    'apply-duration-average': null,
    'plan-duration-average': null,
    'policy-check-failures': null,
    'tag-names': [...tagNames],
    'created-at': timestamp(workspace.createdAt),
    'updated-at': timestamp(workspace.updatedAt),
  };
}

/**
 * `tagNames` are the workspace's tags, sorted (every document has them, as in HCP). `permissions` are the caller's, `facts` summarize its runs: both are left out where they were not read
 * (resources included in another document), rather than shown as a "none" that may be false. `lock`,
 * where known, gives `locked` and `locked-by` (a person's lock, or the run holding the workspace).
 */
export function serializeWorkspace(
  workspace: Workspace,
  organizationName: string,
  tagNames: readonly string[],
  permissions?: Permissions,
  facts?: WorkspaceFacts,
  lock?: LockState,
): Resource {
  const holder = lock && lockedBy(lock);
  return {
    id: workspace.id,
    type: 'workspaces',
    attributes: {
      ...settingAttributes(workspace),
      ...readOnlyAttributes(workspace, tagNames),
      ...(facts && { 'run-failures': facts.runFailures, 'workspace-kpis-runs-count': facts.runsCount }),
      ...(permissions && { permissions }),
      ...(lock && { locked: holder !== null }),
    },
    relationships: {
      organization: toOne('organizations', organizationName),
      ...(facts && {
        'current-run': toOne('runs', facts.currentRunId),
        'latest-run': toOne('runs', facts.latestRunId),
        'current-configuration-version': toOne('configuration-versions', facts.currentConfigurationVersionId),
      }),
      ...(lock && { 'locked-by': toOne(holder?.type ?? 'runs', holder?.id ?? null) }),
    },
    links: {
      ...selfLink(`/organizations/${organizationName}/workspaces/${workspace.name}`),
      'self-html': `/app/${organizationName}/workspaces/${workspace.name}`,
    },
  };
}
