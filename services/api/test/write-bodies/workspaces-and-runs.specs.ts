import { type RunStatus } from '@runtasks/shared/domain';
import { Run, Workspace } from '@runtasks/shared/db';
import { MAX_PLAN_DEPTH } from '../../src/routes/runs.routes.ts';
import { api, createRun } from '../../../../test/support/fixtures.ts';
import { uniqueName } from '../../../../test/support/assertions.ts';
import { bool, deepObject, list, object, relationshipFields, relationshipRequired, resourceFields, str, type WriteSpec } from './model.ts';
import { type Fixtures } from './fixtures.ts';

/** WriteSpecs: Workspaces, their locks, runs and run actions, and the reports of local runs. */
export async function addWorkspaceAndRunSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures): Promise<void> {
  const {
    admin,
    main,
    workspace,
    wsMain,
    wsByName,
    wsById,
    runWithStatus,
    runForActions,
    canceledRun,
    stageOf,
    stageAwaiting,
    stagePending,
    workspaceName,
    h,
    em,
  } = f;
  const workspaceAttributes = {
    description: str('text', 1000, { nullable: true }),
    'auto-apply': bool,
    'working-directory': str('text', 1000),
    // terraform_version is varchar(32).
    'terraform-version': str('version', 32),
    'tag-names': list(),
    'tag-names/0': str('name', 255),
  };
  const workspaceDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'workspaces', attributes } });
  const allWorkspaceAttributes = (name: string) => ({
    name,
    description: 'a workspace ✓',
    'auto-apply': 'false',
    'working-directory': 'infra/中文',
    'terraform-version': '1.9.5',
    'tag-names': ['prop-tag', 'env:prop'],
  });
  SPECS['POST /organizations/:organization_name/workspaces'] = {
    attributes: '/data/attributes',
    fields: resourceFields('workspaces', { name: str('name', 90), ...workspaceAttributes }),
    required: ['/data', '/data/type', '/data/attributes', '/data/attributes/name'],
    success: 201,
    base: async () => ({ path: `/organizations/${main}/workspaces`, body: workspaceDocument(allWorkspaceAttributes('ws-base')) }),
    fresh: async () => ({ path: `/organizations/${main}/workspaces`, body: workspaceDocument(allWorkspaceAttributes(uniqueName('ws'))) }),
    failures: [async () => ({ path: `/organizations/${main}/workspaces`, body: workspaceDocument({ name: 'ws-main' }) })],
  };
  const workspacePatchSpec = (workspaceId: string, pathFor: (name: string) => string): WriteSpec => {
    // The name is read back each time: a hostile body may have renamed the workspace.
    const current = async (): Promise<[string, string]> => {
      const name = await workspaceName(workspaceId);
      return [pathFor(name), name];
    };
    return {
      attributes: '/data/attributes',
      fields: resourceFields('workspaces', { name: str('name', 90), ...workspaceAttributes }),
      required: ['/data', '/data/type'],
      success: 200,
      base: async () => {
        const [path, name] = await current();
        return { path, body: workspaceDocument(allWorkspaceAttributes(name)) };
      },
      fresh: async () => ({ path: (await current())[0], body: workspaceDocument({ description: null, 'auto-apply': true }) }),
      failures: [
        // Taken name: nothing of the change is kept.
        async () => ({ path: (await current())[0], body: workspaceDocument({ name: 'ws-main', description: 'renamed' }) }),
      ],
    };
  };
  SPECS['PATCH /organizations/:organization_name/workspaces/:workspace_name'] = workspacePatchSpec(
    wsByName,
    (name) => `/organizations/${main}/workspaces/${encodeURIComponent(name)}`,
  );
  SPECS['PATCH /workspaces/:workspace_id'] = workspacePatchSpec(wsById, () => `/workspaces/${wsById}`);

  const runDocument = (workspaceId: string, attributes: Record<string, unknown>, configurationVersion?: unknown) => ({
    data: {
      type: 'runs',
      attributes,
      relationships: {
        workspace: { data: { type: 'workspaces', id: workspaceId } },
        ...(configurationVersion === undefined ? {} : { 'configuration-version': configurationVersion }),
      },
    },
  });
  SPECS['POST /runs'] = {
    attributes: '/data/attributes',
    fields: resourceFields(
      'runs',
      {
        message: str('text', 10_000, { nullable: true }),
        'plan-only': bool,
        'is-destroy': bool,
        'auto-apply': bool,
        'plan-json': { type: 'object', nullable: false, planJson: true },
      },
      {
        '': object(),
        ...relationshipFields('workspace', 'workspaces'),
        // configuration_version_id is varchar(32).
        ...relationshipFields('configuration-version', 'configuration-versions', { max: 32, nullable: true, nonEmpty: false }),
      },
    ),
    required: [
      '/data',
      '/data/type',
      ...relationshipRequired('workspace'),
      '/data/relationships/configuration-version/data',
      '/data/relationships/configuration-version/data/type',
      '/data/relationships/configuration-version/data/id',
    ],
    success: 201,
    base: async () => ({
      path: '/runs',
      body: runDocument(
        wsMain,
        { message: 'base', 'plan-only': 'false', 'is-destroy': false, 'auto-apply': false, 'plan-json': { format_version: '1.2' } },
        { data: { type: 'configuration-versions', id: 'cv-ntv3HbhJqvFzamy7' } },
      ),
    }),
    // The deepest plan document accepted.
    fresh: async () => ({ path: '/runs', body: runDocument(wsMain, { message: 'fresh', 'plan-json': deepObject(MAX_PLAN_DEPTH) }) }),
    failures: [async () => ({ path: '/runs', body: runDocument('ws-doesnotexist00000', { message: 'missing' }) })],
  };

  const actionSpec = (action: 'apply' | 'cancel' | 'discard'): WriteSpec => ({
    attributes: '',
    fields: { '/comment': str('text', 10_000, { nullable: true }) },
    required: [],
    success: 202,
    base: async () => ({ path: `/runs/${runForActions}/actions/${action}`, body: { comment: 'base' } }),
    fresh: async () => ({
      path: `/runs/${await runWithStatus(wsMain, action === 'apply' ? 'planned' : undefined)}/actions/${action}`,
      body: { comment: 'fresh 🚀' },
    }),
    failures: [
      async () => ({ path: `/runs/${canceledRun}/actions/${action}`, body: { comment: 'too late' } }),
      async () => ({ path: `/runs/run-doesnotexist0000/actions/${action}`, body: {} }),
    ],
  });
  SPECS['POST /runs/:run_id/actions/apply'] = actionSpec('apply');
  const commentDocument = (body: string) => ({ data: { type: 'comments', attributes: { body } } });
  SPECS['POST /runs/:run_id/comments'] = {
    attributes: '/data/attributes',
    fields: resourceFields('comments', { body: str('text', 10_000, { nonEmpty: true }) }),
    required: ['/data', '/data/type', '/data/attributes', '/data/attributes/body'],
    success: 201,
    base: async () => ({ path: `/runs/${runForActions}/comments`, body: commentDocument('base') }),
    fresh: async () => ({ path: `/runs/${runForActions}/comments`, body: commentDocument('fresh 🚀') }),
    failures: [async () => ({ path: '/runs/run-doesnotexist0000/comments', body: commentDocument('nowhere') })],
  };
  SPECS['POST /runs/:run_id/actions/cancel'] = actionSpec('cancel');
  SPECS['POST /runs/:run_id/actions/discard'] = actionSpec('discard');

  // The workspace queue's actions: locks, and forcing a waiting run (force-cancel always 409s here: a cancel ends a run at once).
  const lockedWorkspace = async (): Promise<string> => {
    const id = await workspace(uniqueName('ws-lock'));
    const res = await api(h, 'post', `/workspaces/${id}/actions/lock`, admin, { reason: 'set-up' });
    if (res.status !== 200) throw new Error(`lock: ${res.status} ${res.text}`);
    return id;
  };
  // Each base and failure has a workspace of its own: a mutated base may succeed, and must not unlock a failure's.
  const wsLockBase = await workspace('ws-lock-base');
  const lockedBase = await lockedWorkspace();
  const neverLocked = await workspace('ws-never-locked');
  SPECS['POST /workspaces/:workspace_id/actions/lock'] = {
    attributes: '',
    fields: { '/reason': str('text', 1000) },
    required: [],
    success: 200,
    base: async () => ({ path: `/workspaces/${wsLockBase}/actions/lock`, body: { reason: 'base' } }),
    fresh: async () => ({ path: `/workspaces/${await workspace(uniqueName('ws-lock'))}/actions/lock`, body: { reason: 'fresh 🚀' } }),
    failures: [
      async () => ({ path: `/workspaces/${await lockedWorkspace()}/actions/lock`, body: { reason: 'again' } }),
      async () => ({ path: '/workspaces/ws-doesnotexist0000/actions/lock', body: {} }),
    ],
  };
  const unlockSpec = (action: 'unlock' | 'force-unlock'): WriteSpec => ({
    attributes: '',
    fields: {},
    required: [],
    success: 200,
    base: async () => ({ path: `/workspaces/${action === 'unlock' ? lockedBase : await lockedWorkspace()}/actions/${action}`, body: {} }),
    fresh: async () => ({ path: `/workspaces/${await lockedWorkspace()}/actions/${action}`, body: {} }),
    failures: [
      async () => ({ path: `/workspaces/${neverLocked}/actions/${action}`, body: {} }),
      async () => ({ path: `/workspaces/ws-doesnotexist0000/actions/${action}`, body: {} }),
    ],
  });
  SPECS['POST /workspaces/:workspace_id/actions/unlock'] = unlockSpec('unlock');
  SPECS['POST /workspaces/:workspace_id/actions/force-unlock'] = unlockSpec('force-unlock');
  /** A run waiting behind another on a workspace of its own. */
  const waitingRun = async (): Promise<string> => {
    const id = await workspace(uniqueName('ws-queue'));
    await createRun(h, admin, id);
    return createRun(h, admin, id);
  };
  const baseWaiting = await waitingRun();
  SPECS['POST /runs/:run_id/actions/force-execute'] = {
    attributes: '',
    fields: { '/comment': str('text', 10_000, { nullable: true }) },
    required: [],
    success: 202,
    base: async () => ({ path: `/runs/${baseWaiting}/actions/force-execute`, body: {} }),
    fresh: async () => ({ path: `/runs/${await waitingRun()}/actions/force-execute`, body: {} }),
    failures: [
      async () => ({ path: `/runs/${canceledRun}/actions/force-execute`, body: {} }),
      async () => ({ path: '/runs/run-doesnotexist0000/actions/force-execute', body: {} }),
    ],
  };
  SPECS['POST /runs/:run_id/actions/force-cancel'] = {
    attributes: '',
    fields: { '/comment': str('text', 10_000, { nullable: true }) },
    required: [],
    success: 409,
    base: async () => ({ path: `/runs/${canceledRun}/actions/force-cancel`, body: { comment: 'base' } }),
    fresh: async () => ({ path: `/runs/${await runWithStatus(wsMain, 'canceled')}/actions/force-cancel`, body: { comment: 'fresh' } }),
    failures: [async () => ({ path: '/runs/run-doesnotexist0000/actions/force-cancel', body: {} })],
  };

  // The reports of a local run: its plan errored, its apply finished or errored (by its own id or its run's).
  const wsLocal = await workspace('ws-local');
  await em().nativeUpdate(Workspace, { id: wsLocal }, { executionMode: 'local' });
  f.wsPlanReports = wsLocal;
  const reportSpec = (kind: 'plan/actions/error' | 'apply/actions/finish' | 'apply/actions/error', byRun: boolean): WriteSpec => {
    const status: RunStatus = kind.startsWith('plan') ? 'planning' : 'applying';
    const pathOf = async (runId: string): Promise<string> => {
      if (byRun) return `/runs/${runId}/${kind}`;
      const run = await em().findOneOrFail(Run, { id: runId });
      return kind.startsWith('plan') ? `/plans/${run.planId}/actions/error` : `/applies/${run.applyId}/${kind.replace('apply/', '')}`;
    };
    const withMessage = kind.endsWith('error');
    const body = (message: string) => (withMessage ? { message } : { comment: message });
    const waiting = runWithStatus(wsLocal, status);
    return {
      attributes: '',
      fields: withMessage
        ? { '/message': str('text', 10_000, { nonEmpty: true }) }
        : { '/comment': str('text', 10_000, { nullable: true }) },
      required: withMessage ? ['/message'] : [],
      success: 200,
      base: async () => ({ path: await pathOf(await waiting), body: body('base') }),
      fresh: async () => ({ path: await pathOf(await runWithStatus(wsLocal, status)), body: body('fresh 🚀') }),
      failures: [
        // Not waiting for this report, a remote run, and no run at all.
        async () => ({ path: await pathOf(await runWithStatus(wsLocal, 'pending')), body: body('too early') }),
        async () => ({ path: await pathOf(await runWithStatus(wsMain, status)), body: body('remote') }),
        async () => ({
          path: byRun
            ? `/runs/run-doesnotexist0000/${kind}`
            : kind.startsWith('plan')
              ? '/plans/plan-doesnotexist000/actions/error'
              : `/applies/apply-doesnotexist00/${kind.replace('apply/', '')}`,
          body: body('none'),
        }),
      ],
    };
  };
  SPECS['POST /plans/:plan_id/actions/error'] = reportSpec('plan/actions/error', false);
  SPECS['POST /runs/:run_id/plan/actions/error'] = reportSpec('plan/actions/error', true);
  SPECS['POST /applies/:apply_id/actions/finish'] = reportSpec('apply/actions/finish', false);
  SPECS['POST /runs/:run_id/apply/actions/finish'] = reportSpec('apply/actions/finish', true);
  SPECS['POST /applies/:apply_id/actions/error'] = reportSpec('apply/actions/error', false);
  SPECS['POST /runs/:run_id/apply/actions/error'] = reportSpec('apply/actions/error', true);

  SPECS['POST /task-stages/:task_stage_id/actions/override'] = {
    attributes: '',
    fields: { '/comment': str('text', 10_000, { nullable: true }) },
    required: [],
    success: 200,
    base: async () => ({ path: `/task-stages/${stageAwaiting}/actions/override`, body: { comment: 'base' } }),
    fresh: async () => ({ path: `/task-stages/${await stageOf('awaiting_override')}/actions/override`, body: { comment: null } }),
    failures: [
      async () => ({ path: `/task-stages/${stagePending}/actions/override`, body: { comment: 'not awaiting' } }),
      async () => ({ path: '/task-stages/ts-doesnotexist00000/actions/override', body: {} }),
    ],
  };
}
