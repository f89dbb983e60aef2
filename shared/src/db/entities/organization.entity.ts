import { defineEntity, p } from '@mikro-orm/core';
import { EDITIONS } from '../../domain/editions.ts';
import type { CollaboratorAuthPolicy } from '../../domain/organization-settings.ts';
import type { ExecutionMode } from '../../domain/statuses.ts';

const OrganizationSchema = defineEntity({
  name: 'Organization',
  tableName: 'organizations',
  properties: {
    id: p.string().length(32).primary(),
    name: p.string().length(40).unique(),
    email: p.text(),
    edition: p.enum(EDITIONS).default('standard'),
    // Off by default: HCP's documented rule is that a failed mandatory task stops the run.
    taskOverridesEnabled: p.boolean().default(false),
    // The `global-run-tasks` entitlement (HCP's Business plan); go-tfe's tests switch it through feature sets.
    globalRunTasksEnabled: p.boolean().default(true),
    // Kept by triggers on run_tasks (never written here): the total of the task list without a count.
    runTaskCount: p.integer().default(0),
    // HCP's organization settings, with its defaults; docs/go-tfe.md says which ones the service acts on.
    defaultExecutionMode: p.text().$type<ExecutionMode>().default('remote'),
    allowForceDeleteWorkspaces: p.boolean().default(false),
    assessmentsEnforced: p.boolean().default(false),
    collaboratorAuthPolicy: p.text().$type<CollaboratorAuthPolicy>().default('password'),
    costEstimationEnabled: p.boolean().default(false),
    sendPassingStatusesForUntriggeredSpeculativePlans: p.boolean().default(false),
    aggregatedCommitStatusEnabled: p.boolean().default(false),
    speculativePlanManagementEnabled: p.boolean().default(true),
    ownersTeamSamlRoleId: p.text().nullable(),
    sessionRemember: p.integer().default(20160),
    sessionTimeout: p.integer().default(20160),
    stacksEnabled: p.boolean().default(false),
    registryMonorepoSupportEnabled: p.boolean().default(false),
    // Which values of the single sign-on teams claim stand for which team (docs/sso.md); null: team names match.
    ssoTeamMapping: p.json<Record<string, string>>().nullable(),
    // Set by the site admin only (`/admin/organizations`).
    accessBetaTools: p.boolean().default(false),
    globalModuleSharing: p.boolean().default(false),
    globalProviderSharing: p.boolean().default(false),
    terraformBuildWorkerApplyTimeout: p.text().default('24h'),
    terraformBuildWorkerPlanTimeout: p.text().default('2h'),
    terraformWorkerSudoEnabled: p.boolean().default(false),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class Organization extends OrganizationSchema.class {}
OrganizationSchema.setClass(Organization);
