import type { RouteDef } from './define.ts';
import { adminRoutes } from './admin.routes.ts';
import { auditTrailRoutes } from './audit-trail.routes.ts';
import { adminOrganizationRoutes } from './admin-organizations.routes.ts';
import { callbackRoutes } from './callback.routes.ts';
import { ciTrustRuleRoutes } from './ci-trust-rules.routes.ts';
import { configurationVersionRoutes } from './configuration-versions.routes.ts';
import { metaRoutes } from './meta.routes.ts';
import { organizationRoutes } from './organizations.routes.ts';
import { executionRoutes } from './executions.routes.ts';
import { runRoutes } from './runs.routes.ts';
import { runCommentRoutes } from './run-comments.routes.ts';
import { runEventRoutes } from './run-events.routes.ts';
import { runTaskRoutes } from './run-tasks.routes.ts';
import { taskResultRoutes } from './task-results.routes.ts';
import { taskStageRoutes } from './task-stages.routes.ts';
import { workspaceTaskRoutes } from './workspace-tasks.routes.ts';
import { teamWorkspaceRoutes } from './team-workspaces.routes.ts';
import { teamRoutes } from './teams.routes.ts';
import { tokenRoutes } from './tokens.routes.ts';
import { workspaceRoutes } from './workspaces.routes.ts';
import { workspaceLockRoutes } from './workspace-lock.routes.ts';
import { workspaceSafeDeleteRoutes } from './workspace-safe-delete.routes.ts';
import { tagRoutes } from './tags.routes.ts';
import { tokenIdRoutes } from './token-ids.routes.ts';
import { planJsonRoutes } from './plan-json.routes.ts';
import { notificationConfigurationRoutes } from './notification-configurations.routes.ts';
import { remoteStateConsumerRoutes } from './remote-state-consumers.routes.ts';
import { userRoutes } from './users.routes.ts';
import { organizationMembershipRoutes } from './organization-memberships.routes.ts';
import { teamMemberRoutes } from './team-members.routes.ts';

/** Every API route. The isolation test walks this table, so a new route is covered automatically. */
export const ROUTES: readonly RouteDef[] = [
  ...metaRoutes,
  ...organizationRoutes,
  ...tokenRoutes,
  ...tokenIdRoutes,
  ...teamRoutes,
  ...teamWorkspaceRoutes,
  ...workspaceRoutes,
  ...runRoutes,
  ...runCommentRoutes,
  ...runEventRoutes,
  ...planJsonRoutes,
  ...executionRoutes,
  ...runTaskRoutes,
  ...workspaceTaskRoutes,
  ...taskStageRoutes,
  ...taskResultRoutes,
  ...callbackRoutes,
  ...configurationVersionRoutes,
  ...adminRoutes,
  ...adminOrganizationRoutes,
  ...workspaceLockRoutes,
  ...workspaceSafeDeleteRoutes,
  ...remoteStateConsumerRoutes,
  ...notificationConfigurationRoutes,
  ...tagRoutes,
  ...auditTrailRoutes,
  ...userRoutes,
  ...organizationMembershipRoutes,
  ...teamMemberRoutes,
  ...ciTrustRuleRoutes,
];
