import { ApiToken } from './api-token.entity.ts';
import { ConfigurationVersion } from './configuration-version.entity.ts';
import { DeliveryAttempt } from './delivery-attempt.entity.ts';
import { Organization } from './organization.entity.ts';
import { OutboxEvent } from './outbox-event.entity.ts';
import { PageSession } from './page-session.entity.ts';
import { RunComment } from './run-comment.entity.ts';
import { RunTask } from './run-task.entity.ts';
import { Run } from './run.entity.ts';
import { TaskResultOutcome } from './task-result-outcome.entity.ts';
import { TaskResult } from './task-result.entity.ts';
import { TaskStage } from './task-stage.entity.ts';
import { Tag, WorkspaceTag } from './tag.entity.ts';
import { TeamWorkspace } from './team-workspace.entity.ts';
import { Team } from './team.entity.ts';
import { WorkspaceTask } from './workspace-task.entity.ts';
import { WorkspaceRemoteStateConsumer } from './workspace-remote-state-consumer.entity.ts';
import { Workspace } from './workspace.entity.ts';

export {
  ApiToken,
  ConfigurationVersion,
  DeliveryAttempt,
  Organization,
  OutboxEvent,
  PageSession,
  Run,
  RunComment,
  RunTask,
  TaskResult,
  TaskResultOutcome,
  TaskStage,
  Tag,
  Team,
  TeamWorkspace,
  Workspace,
  WorkspaceRemoteStateConsumer,
  WorkspaceTag,
  WorkspaceTask,
};
export { TOKEN_KINDS, type TokenKind } from './api-token.entity.ts';
export { CONFIGURATION_VERSION_STATUSES } from './configuration-version.entity.ts';

export const ENTITIES = [
  Organization,
  Team,
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
  WorkspaceRemoteStateConsumer,
  Tag,
  WorkspaceTag,
];
