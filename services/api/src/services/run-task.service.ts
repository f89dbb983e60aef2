import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '@runtasks/shared/errors';
import { FREE_RUN_TASK_LIMIT, FREE_RUN_TASK_WORKSPACE_LIMIT } from '@runtasks/shared/domain';
import { RunTask, WorkspaceTask, type Organization } from '@runtasks/shared/db';
import { answerExcerpt, describeOutcome, encodePayload, verificationPayload } from '@runtasks/shared/outbound';
import type { ApiDeps } from '../context.ts';

/** How much of a refusing endpoint's answer a failed verification's 422 shows. */
const VERIFICATION_EXCERPT_LIMIT = 512;

/**
 * The verification request HCP sends when a task is created or its URL or key changes: signed with
 * the (new) key, `access_token: "test-token"`, `stage: "test"`, through the same guarded client the
 * worker uses. Anything but 200 in time is a 422 that says what the endpoint answered (its status and
 * the first bytes of its answer, the key cut out, in `detail` and `meta`), so that the task's author can
 * tell why; nothing is persisted.
 */
export async function verifyTaskEndpoint(deps: ApiDeps, organizationName: string, url: string, hmacKey: string | null): Promise<void> {
  const body = encodePayload(verificationPayload(deps.config.publicBaseUrl, organizationName));
  const timeoutSeconds = deps.config.taskVerificationTimeoutSeconds;
  const outcome = await deps.taskClient.post(url, body, hmacKey, AbortSignal.timeout(timeoutSeconds * 1000));
  if (outcome.kind === 'response' && outcome.status === 200) return;
  const answered = outcome.kind === 'response' ? answerExcerpt(outcome.bodyExcerpt, [hmacKey ?? ''], VERIFICATION_EXCERPT_LIMIT) : '';
  throw new ApiError(
    422,
    'run task verification failed',
    `The test request to ${url} was not acknowledged: ${describeOutcome(outcome)}${answered === '' ? '' : ` with: ${answered}`}. ` +
      `The endpoint must answer it with HTTP 200 within ${timeoutSeconds} s.`,
    { pointer: '/data/attributes/url' },
    {},
    outcome.kind === 'response' ? { 'http-status': outcome.status, 'response-excerpt': answered } : { 'error-kind': outcome.errorKind },
  );
}

export function isGlobalEntitled(organization: Organization): boolean {
  return organization.edition === 'standard' && organization.globalRunTasksEnabled;
}

/** Free edition: one run task per organization. */
export async function assertEditionAllowsAnotherTask(em: EntityManager, organization: Organization): Promise<void> {
  if (organization.edition !== 'free') return;
  if ((await em.count(RunTask, { organization: organization.id })) >= FREE_RUN_TASK_LIMIT) {
    throw new ApiError(
      422,
      'run task limit reached',
      `The free edition includes ${FREE_RUN_TASK_LIMIT} run task per organization; delete the existing one or upgrade to the standard edition.`,
      { pointer: '/data' },
    );
  }
}

/** Free edition: run tasks applied to at most ten workspaces across the organization. */
export async function assertEditionAllowsWorkspace(em: EntityManager, organization: Organization, workspaceId: string): Promise<void> {
  if (organization.edition !== 'free') return;
  const rows: { count: string }[] = await em.execute(
    `select count(distinct wt.workspace_id) as count from workspace_tasks wt join workspaces w on w.id = wt.workspace_id
      where w.organization_id = ? and wt.workspace_id <> ?`,
    [organization.id, workspaceId],
  );
  if (Number(rows[0]?.count ?? 0) >= FREE_RUN_TASK_WORKSPACE_LIMIT) {
    throw new ApiError(
      422,
      'run task workspace limit reached',
      `The free edition applies run tasks to at most ${FREE_RUN_TASK_WORKSPACE_LIMIT} workspaces; remove the task from another workspace or upgrade to the standard edition.`,
      { pointer: '/data/relationships/task' },
    );
  }
}

export async function workspaceTaskIdsOf(em: EntityManager, taskIds: readonly string[]): Promise<Map<string, string[]>> {
  const byTask = new Map<string, string[]>(taskIds.map((id) => [id, []]));
  if (taskIds.length === 0) return byTask;
  const associations = await em.find(
    WorkspaceTask,
    { task: { $in: [...taskIds] } },
    { fields: ['id', 'task'], orderBy: { createdAt: 'asc', id: 'asc' } },
  );
  for (const association of associations) byTask.get(association.task.id)?.push(association.id);
  return byTask;
}
