import { ApiToken } from './api-token.entity.ts';
import { AuditEvent } from './audit-event.entity.ts';
import { AuditTrailToken } from './audit-trail-token.entity.ts';
import { CiTrustRule } from './ci-trust-rule.entity.ts';
import { ConfigurationVersion } from './configuration-version.entity.ts';
import { DeliveryAttempt } from './delivery-attempt.entity.ts';
import { Organization } from './organization.entity.ts';
import { NotificationConfiguration } from './notification-configuration.entity.ts';
import { NotificationDelivery } from './notification-delivery.entity.ts';
import { OrganizationMembership, TeamMembership } from './organization-membership.entity.ts';
import { User } from './user.entity.ts';
import { OutboxEvent } from './outbox-event.entity.ts';
import { PageSession } from './page-session.entity.ts';
import { RunComment } from './run-comment.entity.ts';
import { RunEvent } from './run-event.entity.ts';
import { RunTask } from './run-task.entity.ts';
import { Run } from './run.entity.ts';
import { TaskResultOutcome } from './task-result-outcome.entity.ts';
import { TaskResult } from './task-result.entity.ts';
import { TaskStage } from './task-stage.entity.ts';
import { StoredObject, StoredObjectChunk } from './stored-object.entity.ts';
import { OidcSignIn, UserIdentity } from './sso.entity.ts';
import { Tag, WorkspaceTag } from './tag.entity.ts';
import { TeamWorkspace } from './team-workspace.entity.ts';
import { Team } from './team.entity.ts';
import { WorkspaceTask } from './workspace-task.entity.ts';
import { WorkspaceRemoteStateConsumer } from './workspace-remote-state-consumer.entity.ts';
import { Workspace } from './workspace.entity.ts';

export {
  ApiToken,
  AuditEvent,
  AuditTrailToken,
  CiTrustRule,
  ConfigurationVersion,
  DeliveryAttempt,
  NotificationConfiguration,
  NotificationDelivery,
  OidcSignIn,
  Organization,
  OrganizationMembership,
  OutboxEvent,
  PageSession,
  Run,
  RunComment,
  RunEvent,
  RunTask,
  StoredObject,
  StoredObjectChunk,
  TaskResult,
  TaskResultOutcome,
  TaskStage,
  Tag,
  Team,
  TeamMembership,
  TeamWorkspace,
  User,
  UserIdentity,
  Workspace,
  WorkspaceRemoteStateConsumer,
  WorkspaceTag,
  WorkspaceTask,
};
export { TOKEN_KINDS, type TokenKind } from './api-token.entity.ts';
export type { DeliveryResponse } from './notification-configuration.entity.ts';
export { CONFIGURATION_VERSION_STATUSES } from './configuration-version.entity.ts';
export { STORED_OBJECT_KINDS, type StoredObjectKind } from './stored-object.entity.ts';

export const ENTITIES = [
  Organization,
  Team,
  User,
  OrganizationMembership,
  TeamMembership,
  ApiToken,
  Workspace,
  TeamWorkspace,
  RunTask,
  WorkspaceTask,
  Run,
  TaskStage,
  TaskResult,
  TaskResultOutcome,
  DeliveryAttempt,
  OutboxEvent,
  ConfigurationVersion,
  PageSession,
  RunComment,
  RunEvent,
  WorkspaceRemoteStateConsumer,
  Tag,
  WorkspaceTag,
  NotificationConfiguration,
  NotificationDelivery,
  AuditEvent,
  AuditTrailToken,
  CiTrustRule,
  StoredObject,
  StoredObjectChunk,
  UserIdentity,
  OidcSignIn,
];
