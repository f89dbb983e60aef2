import { ENFORCEMENT_LEVELS, RUN_STAGES } from '@runtasks/shared/domain';
import { TaskResult } from '@runtasks/shared/db';
import { CALLBACK_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import { uniqueName } from '../../../../test/support/assertions.ts';
import {
  attributeFields,
  bool,
  type Kind,
  list,
  literal,
  object,
  oneOf,
  relationshipFields,
  relationshipRequired,
  resourceFields,
  stages,
  str,
  type WriteSpec,
} from './model.ts';
import { taskServerUrl } from './wrong-values.ts';
import { type Fixtures } from './fixtures.ts';

/** WriteSpecs: Run tasks, their attachment to workspaces, and the task server's callbacks. */
export async function addRunTaskSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures): Promise<void> {
  const {
    main,
    mainId,
    wsTasks,
    wsOverride,
    taskPatched,
    taskAttached,
    workspaceTaskPatched,
    runWithStatus,
    directTask,
    otherOrganizationTask,
    h,
    em,
  } = f;
  const runTaskAttributes = (nameKind: Kind): Record<string, Kind> => ({
    name: nameKind,
    url: str('url', 2048),
    description: str('text', 300, { nullable: true }),
    category: literal('task'),
    'hmac-key': str('text', 512, { nullable: true }),
    hmac_key: str('text', 512, { nullable: true }),
    enabled: bool,
    'global-configuration': object(true),
    'global-configuration/enabled': bool,
    'global-configuration/stages': stages(false),
    'global-configuration/enforcement-level': oneOf(ENFORCEMENT_LEVELS),
  });
  const runTaskDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'tasks', attributes } });
  const allRunTaskAttributes = (name: string) => ({
    name,
    url: taskServerUrl,
    description: 'checks ✓',
    category: 'task',
    enabled: 'true',
    'global-configuration': { enabled: false, stages: ['pre_plan', 'post_plan'], 'enforcement-level': 'advisory' },
  });
  SPECS['POST /organizations/:organization_name/tasks'] = {
    attributes: '/data/attributes',
    fields: resourceFields('tasks', runTaskAttributes(str('name', 255))),
    required: ['/data', '/data/type', '/data/attributes', '/data/attributes/name', '/data/attributes/url', '/data/attributes/category'],
    success: 201,
    base: async () => ({ path: `/organizations/${main}/tasks`, body: runTaskDocument(allRunTaskAttributes('task-base')) }),
    fresh: async () => ({
      path: `/organizations/${main}/tasks`,
      body: runTaskDocument({ ...allRunTaskAttributes(uniqueName('task')), 'hmac-key': 'secret' }),
    }),
    failures: [
      // The endpoint does not acknowledge the verification request.
      async () => ({
        path: `/organizations/${main}/tasks`,
        body: runTaskDocument({ ...allRunTaskAttributes(uniqueName('task')), url: `${taskServerUrl}/fail` }),
      }),
      async () => ({ path: `/organizations/${main}/tasks`, body: runTaskDocument(allRunTaskAttributes('task-attached')) }),
    ],
  };
  SPECS['PATCH /tasks/:task_id'] = {
    attributes: '/data/attributes',
    fields: resourceFields('tasks', runTaskAttributes(str('name', 255, { nonEmpty: true }))),
    required: ['/data', '/data/type'],
    success: 200,
    base: async () => ({ path: `/tasks/${taskPatched}`, body: runTaskDocument(allRunTaskAttributes('task-patched')) }),
    fresh: async () => ({ path: `/tasks/${taskPatched}`, body: runTaskDocument({ description: 'fresh', enabled: false }) }),
    failures: [
      // A URL that fails verification: nothing is changed, not even the description.
      async () => ({ path: `/tasks/${taskPatched}`, body: runTaskDocument({ description: 'changed', url: `${taskServerUrl}/fail` }) }),
      async () => ({ path: `/tasks/${taskPatched}`, body: runTaskDocument({ name: 'task-attached', description: 'changed' }) }),
      async () => ({ path: '/tasks/task-doesnotexist000', body: runTaskDocument({ description: 'missing' }) }),
    ],
  };

  const stageAttributes = { stage: oneOf(RUN_STAGES), stages: stages(true) };
  const workspaceTaskDocument = (taskId: string, attributes: Record<string, unknown>) => ({
    data: { type: 'workspace-tasks', attributes, relationships: { task: { data: { type: 'tasks', id: taskId } } } },
  });
  SPECS['POST /workspaces/:workspace_id/tasks'] = {
    attributes: '/data/attributes',
    fields: resourceFields(
      'workspace-tasks',
      { 'enforcement-level': oneOf(ENFORCEMENT_LEVELS), ...stageAttributes },
      { '': object(), ...relationshipFields('task', 'tasks') },
    ),
    required: ['/data', '/data/type', '/data/attributes', '/data/attributes/enforcement-level', ...relationshipRequired('task')],
    success: 201,
    base: async () => ({
      path: `/workspaces/${wsTasks}/tasks`,
      body: workspaceTaskDocument(taskAttached, {
        'enforcement-level': 'advisory',
        stage: 'pre_plan',
        stages: ['pre_apply', 'post_plan'],
      }),
    }),
    fresh: async () => ({
      path: `/workspaces/${wsTasks}/tasks`,
      body: workspaceTaskDocument(await directTask(mainId), { 'enforcement-level': 'mandatory', stages: ['pre_plan'] }),
    }),
    failures: [
      async () => ({
        path: `/workspaces/${wsTasks}/tasks`,
        body: workspaceTaskDocument(taskAttached, { 'enforcement-level': 'advisory' }),
      }),
      async () => ({
        path: `/workspaces/${wsTasks}/tasks`,
        body: workspaceTaskDocument('task-doesnotexist000', { 'enforcement-level': 'advisory' }),
      }),
      async () => ({
        path: `/workspaces/${wsTasks}/tasks`,
        body: workspaceTaskDocument(otherOrganizationTask, { 'enforcement-level': 'advisory' }),
      }),
    ],
  };
  const workspaceTaskPatch = (attributes: Record<string, unknown>) => ({ data: { type: 'workspace-tasks', attributes } });
  SPECS['PATCH /workspaces/:workspace_id/tasks/:workspace_task_id'] = {
    attributes: '/data/attributes',
    fields: {
      '/data': object(),
      '/data/type': literal('workspace-tasks'),
      '/data/attributes': object(),
      ...attributeFields('/data/attributes', { 'enforcement-level': oneOf(ENFORCEMENT_LEVELS), ...stageAttributes }),
    },
    required: ['/data'],
    success: 200,
    base: async () => ({
      path: `/workspaces/${wsTasks}/tasks/${workspaceTaskPatched}`,
      body: workspaceTaskPatch({ 'enforcement-level': 'mandatory', stage: 'post_plan', stages: ['post_plan'] }),
    }),
    fresh: async () => ({
      path: `/workspaces/${wsTasks}/tasks/${workspaceTaskPatched}`,
      body: workspaceTaskPatch({ 'enforcement-level': 'advisory', stage: 'pre_apply' }),
    }),
    failures: [
      async () => ({
        path: `/workspaces/${wsTasks}/tasks/wstask-doesnotexist0`,
        body: workspaceTaskPatch({ 'enforcement-level': 'advisory' }),
      }),
    ],
  };

  // -- task server callbacks: authorized by the result's own access token ------------------------
  const openResult = async (): Promise<{ id: string; token: string }> => {
    const runId = await runWithStatus(wsOverride);
    const result = await em().findOneOrFail(TaskResult, { taskStage: { run: runId } });
    const token = generateToken(CALLBACK_TOKEN_PREFIX);
    await em().nativeUpdate(TaskResult, { id: result.id }, { callbackTokenHash: h.secrets.hashToken(token), status: 'running' });
    return { id: result.id, token };
  };
  const callbackResult = await openResult();
  const finalResult = await openResult();
  await em().nativeUpdate(TaskResult, { id: finalResult.id }, { status: 'passed' });
  const expiredResult = await openResult();
  const longAgo = new Date(Date.now() - 60_000);
  await em().nativeUpdate(TaskResult, { id: expiredResult.id }, { progressDeadline: longAgo, hardDeadline: longAgo });

  const outcomeFields = (prefix: string): Record<string, Kind> => ({
    [prefix]: object(),
    [`${prefix}/outcome-id`]: str('text', 255),
    [`${prefix}/description`]: str('text', 1000, { nullable: true }),
    // body may be 5 MiB: only its type is checked here.
    [`${prefix}/body`]: str('text', Number.POSITIVE_INFINITY, { nullable: true }),
    [`${prefix}/url`]: str('text', 2048, { nullable: true }),
    [`${prefix}/tags`]: object(),
    [`${prefix}/tags/Severity`]: list(),
    [`${prefix}/tags/Severity/0`]: object(),
    [`${prefix}/tags/Severity/0/label`]: str('text', 256),
    [`${prefix}/tags/Severity/0/level`]: oneOf(['none', 'info', 'warning', 'error']),
  });
  const outcome = (id: string) => ({
    'outcome-id': id,
    description: 'one finding ✓',
    body: '# Details\n\n中文 😀',
    url: 'https://tasks.example.test/outcomes/1',
    tags: { Severity: [{ label: 'High', level: 'error' }], Status: [{ label: 'Denied' }] },
  });
  const callbackDocument = (status: string) => ({
    data: {
      type: 'task-results',
      attributes: { status, message: 'base ✓', url: 'https://tasks.example.test/results/1', outcomes: [outcome('flat-1')] },
      relationships: {
        outcomes: { data: [{ type: 'task-result-outcomes', attributes: outcome('wrapped-1') }] },
        'task-result-outcomes': { data: [{ type: 'task-result-outcomes', attributes: outcome('wrapped-2') }] },
      },
    },
  });
  const OUTCOME_ITEM = /^(\/data\/attributes\/outcomes\/0|\/data\/relationships\/(?:outcomes|task-result-outcomes)\/data\/0)\/./;
  SPECS['PATCH /task-results/:task_result_id/callback'] = {
    attributes: '/data/attributes',
    fields: {
      '/data': object(),
      '/data/type': oneOf(['task-results', 'task_results']),
      '/data/attributes': object(),
      '/data/attributes/status': oneOf(['running', 'passed', 'failed']),
      '/data/attributes/message': str('text', 10_000, { nullable: true }),
      '/data/attributes/url': str('text', 2048, { nullable: true }),
      '/data/attributes/outcomes': list(),
      ...outcomeFields('/data/attributes/outcomes/0'),
      '/data/relationships': object(),
      '/data/relationships/outcomes': object(),
      '/data/relationships/outcomes/data': list(),
      '/data/relationships/outcomes/data/0': object(),
      ...outcomeFields('/data/relationships/outcomes/data/0/attributes'),
      '/data/relationships/task-result-outcomes': object(),
      '/data/relationships/task-result-outcomes/data': list(),
      ...outcomeFields('/data/relationships/task-result-outcomes/data/0/attributes'),
    },
    required: [
      '/data',
      '/data/type',
      '/data/attributes',
      '/data/attributes/status',
      '/data/relationships/outcomes/data',
      '/data/relationships/task-result-outcomes/data',
    ],
    success: 200,
    // An outcome has one of two shapes (wrapped in {type, attributes}, or flat): a wrong member is reported at the outcome.
    reportedAt: (pointer) => OUTCOME_ITEM.exec(pointer)?.[1] ?? pointer,
    base: async () => {
      // A hostile body may have been a valid verdict: reopen the result.
      await em().nativeUpdate(TaskResult, { id: callbackResult.id, status: { $ne: 'running' } }, { status: 'running' });
      return { path: `/task-results/${callbackResult.id}/callback`, body: callbackDocument('running'), token: callbackResult.token };
    },
    fresh: async () => {
      const result = await openResult();
      return { path: `/task-results/${result.id}/callback`, body: callbackDocument('passed'), token: result.token };
    },
    failures: [
      async () => ({ path: `/task-results/${finalResult.id}/callback`, body: callbackDocument('failed'), token: finalResult.token }),
      async () => ({ path: `/task-results/${expiredResult.id}/callback`, body: callbackDocument('passed'), token: expiredResult.token }),
      async () => ({ path: `/task-results/${callbackResult.id}/callback`, body: callbackDocument('passed'), token: finalResult.token }),
      async () => ({ path: `/task-results/${callbackResult.id}/callback`, body: callbackDocument('passed') }),
    ],
  };
}
