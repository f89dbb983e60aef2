import { EXECUTION_MODES } from '@runtasks/shared/domain';
import { invalidAttribute } from '@runtasks/shared/errors';
import { type Workspace } from '@runtasks/shared/db';
import { z } from 'zod';
import { flexibleBoolean, nameSchema, resourceDocument, safeText } from './schemas.ts';
import { tagNamesAttribute, tagsRelationship } from './tag-schemas.ts';

/**
 * Every attribute go-tfe's workspace create and update options carry: stored and returned with HCP's
 * default, or, for features this service does not have, accepted only at their "nothing set" value and
 * otherwise refused with a 422 naming the attribute (docs/go-tfe.md, "Workspaces"). Unknown attributes
 * stay ignored, as HCP ignores them.
 */
const pathList = z.array(safeText(1000)).max(100, 'must have at most 100 entries');
const settings = {
  description: safeText(1000).nullable().optional(),
  'auto-apply': flexibleBoolean.optional(),
  'working-directory': safeText(1000).optional(),
  'terraform-version': z
    .string()
    .regex(/^\d+\.\d+\.\d+$/, 'must be a version such as 1.9.0')
    // terraform_version is varchar(32): a longer version was a 500.
    .max(32, 'must be at most 32 characters')
    .optional(),
  // HCP's `agent` mode (Terraform on the organization's agents) has no counterpart here.
  'execution-mode': z.enum(EXECUTION_MODES, { message: 'must be "remote" or "local" (agent execution is not available)' }).optional(),
  // Deprecated in HCP: `true` is the remote execution mode, `false` the local one.
  operations: flexibleBoolean.optional(),
  'allow-destroy-plan': flexibleBoolean.optional(),
  'assessments-enabled': flexibleBoolean.optional(),
  'auto-apply-run-trigger': flexibleBoolean.optional(),
  'auto-destroy-at': z.iso.datetime({ offset: true, message: 'must be an ISO 8601 time or null' }).nullable().optional(),
  'auto-destroy-activity-duration': z
    .string()
    .regex(/^[1-9]\d{0,3}[dh]$/, 'must be a number of days or hours such as "14d" or "12h", or null')
    .nullable()
    .optional(),
  'inherits-project-auto-destroy': flexibleBoolean.optional(),
  'file-triggers-enabled': flexibleBoolean.optional(),
  'global-remote-state': flexibleBoolean.optional(),
  'queue-all-runs': flexibleBoolean.optional(),
  'speculative-enabled': flexibleBoolean.optional(),
  'structured-run-output-enabled': flexibleBoolean.optional(),
  'trigger-prefixes': pathList.optional(),
  'trigger-patterns': pathList.optional(),
  // With the `tags` relationship: the workspace's tags (stored by workspace-tags.ts, not applyAttributes).
  'tag-names': tagNamesAttribute.optional(),
  'setting-overwrites': z.object({ 'execution-mode': flexibleBoolean.optional(), 'agent-pool': flexibleBoolean.optional() }).optional(),
  // Out of scope here (agent pools, VCS, workspace migrations): only "none" is accepted.
  'agent-pool-id': z.null({ message: 'agent pools are not available; only null is accepted' }).optional(),
  'vcs-repo': z.null({ message: 'VCS connections are not available; only null is accepted' }).optional(),
  'migration-environment': z.null({ message: 'workspace migrations are not available; only null is accepted' }).optional(),
};
/** Set only at creation, as in HCP. */
const createOnly = {
  'source-name': safeText(1000).nullable().optional(),
  'source-url': safeText(2048).nullable().optional(),
};

const emptyOnly = (what: string) =>
  z.object({ data: z.array(z.unknown()).max(0, `${what} are not available; only an empty list is accepted`) }).optional();
const relationships = z
  .object({
    tags: tagsRelationship.optional(),
    'tag-bindings': emptyOnly('tag bindings'),
    project: z.unknown().optional(),
  })
  .optional();

export const createSchema = resourceDocument('workspaces', z.object({ name: nameSchema(90), ...settings, ...createOnly }), relationships);
export const updateSchema = resourceDocument(
  'workspaces',
  z.object({ name: nameSchema(90).optional(), ...settings }).default({}),
  relationships,
);

export type WorkspaceAttributes = z.output<typeof updateSchema>['data']['attributes'] & {
  'source-name'?: string | null | undefined;
  'source-url'?: string | null | undefined;
};

/**
 * A workspace triggers runs by prefixes or by patterns, never both: as in HCP, setting one list clears
 * the other, and both non-empty in one request is a 422.
 */
function applyTriggers(workspace: Workspace, input: WorkspaceAttributes): void {
  const prefixes = input['trigger-prefixes'];
  const patterns = input['trigger-patterns'];
  if (prefixes && patterns && prefixes.length > 0 && patterns.length > 0) {
    throw invalidAttribute('/data/attributes/trigger-patterns', 'trigger-patterns and trigger-prefixes cannot both be set');
  }
  if (prefixes !== undefined) workspace.triggerPrefixes = prefixes;
  if (patterns !== undefined) workspace.triggerPatterns = patterns;
  if (prefixes !== undefined && prefixes.length > 0) workspace.triggerPatterns = [];
  if (patterns !== undefined && patterns.length > 0) workspace.triggerPrefixes = [];
}

const BOOLEAN_SETTINGS = [
  ['auto-apply', 'autoApply'],
  ['allow-destroy-plan', 'allowDestroyPlan'],
  ['assessments-enabled', 'assessmentsEnabled'],
  ['auto-apply-run-trigger', 'autoApplyRunTrigger'],
  ['inherits-project-auto-destroy', 'inheritsProjectAutoDestroy'],
  ['file-triggers-enabled', 'fileTriggersEnabled'],
  ['global-remote-state', 'globalRemoteState'],
  ['queue-all-runs', 'queueAllRuns'],
  ['speculative-enabled', 'speculativeEnabled'],
  ['structured-run-output-enabled', 'structuredRunOutputEnabled'],
] as const satisfies readonly (readonly [keyof WorkspaceAttributes, keyof Workspace])[];

function applyExecutionMode(workspace: Workspace, input: WorkspaceAttributes): void {
  const mode = input['execution-mode'] ?? (input.operations === undefined ? undefined : input.operations ? 'remote' : 'local');
  if (input['execution-mode'] !== undefined && input.operations !== undefined && (input.operations ? 'remote' : 'local') !== mode) {
    throw invalidAttribute('/data/attributes/operations', 'operations contradicts execution-mode; send only execution-mode');
  }
  if (mode !== undefined) {
    workspace.executionMode = mode;
    // Setting the mode on the workspace is what HCP calls overwriting the organization's default.
    workspace.overwritesExecutionMode = true;
  }
  const overwrites = input['setting-overwrites'];
  if (overwrites?.['execution-mode'] !== undefined) workspace.overwritesExecutionMode = overwrites['execution-mode'];
  if (overwrites?.['agent-pool'] !== undefined) workspace.overwritesAgentPool = overwrites['agent-pool'];
}

export function applyAttributes(workspace: Workspace, input: WorkspaceAttributes): void {
  if (input.name !== undefined) workspace.name = input.name;
  if (input.description !== undefined) workspace.description = input.description;
  if (input['working-directory'] !== undefined) workspace.workingDirectory = input['working-directory'];
  if (input['terraform-version'] !== undefined) workspace.terraformVersion = input['terraform-version'];
  for (const [attribute, property] of BOOLEAN_SETTINGS) {
    const value = input[attribute];
    if (value !== undefined) workspace[property] = value;
  }
  applyExecutionMode(workspace, input);
  const destroyAt = input['auto-destroy-at'];
  if (destroyAt !== undefined) workspace.autoDestroyAt = destroyAt === null ? null : new Date(destroyAt);
  if (input['auto-destroy-activity-duration'] !== undefined)
    workspace.autoDestroyActivityDuration = input['auto-destroy-activity-duration'];
  applyTriggers(workspace, input);
  if (input['source-name'] !== undefined) workspace.sourceName = input['source-name'];
  if (input['source-url'] !== undefined) workspace.sourceUrl = input['source-url'];
}
