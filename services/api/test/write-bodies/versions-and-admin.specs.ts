import {
  api,
  createOrganization,
  createOrganizationToken,
  createTeam,
  createTeamToken,
  grantWorkspace,
} from '../../../../test/support/fixtures.ts';
import { uniqueName } from '../../../../test/support/assertions.ts';
import {
  attributeFields,
  bool,
  object,
  oneOf,
  relationshipFields,
  relationshipRequired,
  resourceFields,
  str,
  type WriteSpec,
} from './model.ts';
import { describeResponse } from './hostile.ts';
import { tarGz } from './uploads.ts';
import { type Fixtures } from './fixtures.ts';

/** WriteSpecs: Configuration versions, safe deletes, and the site admin's organization routes. */
export async function addVersionAndAdminSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures): Promise<void> {
  const { admin, main, workspace, h } = f;
  // -- configuration versions ----------------------------------------------------------------------
  const wsVersions = await workspace('ws-versions');
  f.wsVersions = wsVersions;
  // A team that may read the workspace's runs, not plan them: it may not create versions.
  const teamRead = await createTeam(h, main, admin, 'team-read');
  await grantWorkspace(h, admin, teamRead, wsVersions, { access: 'read' });
  const teamReadToken = await createTeamToken(h, admin, teamRead);
  const versionDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'configuration-versions', attributes } });
  SPECS['POST /workspaces/:workspace_id/configuration-versions'] = {
    attributes: '/data/attributes',
    fields: resourceFields('configuration-versions', { 'auto-queue-runs': bool, speculative: bool }),
    // No body and `{}` are valid (go-tfe always sends a document; every attribute has a default).
    required: ['/data/type'],
    success: 201,
    base: async () => ({
      path: `/workspaces/${wsVersions}/configuration-versions`,
      body: versionDocument({ 'auto-queue-runs': 'false', speculative: false }),
    }),
    fresh: async () => ({ path: `/workspaces/${wsVersions}/configuration-versions`, body: versionDocument({ speculative: 'true' }) }),
    failures: [
      async () => ({ path: '/workspaces/ws-doesnotexist00000/configuration-versions', body: versionDocument({}) }),
      async () => ({ path: `/workspaces/${wsVersions}/configuration-versions`, body: versionDocument({}), token: teamReadToken }),
    ],
  };
  /** An uploaded version that is not the workspace's current one (a newer one is uploaded after it). */
  const archivableVersion = async (): Promise<string> => {
    const older = await uploadedVersion();
    await uploadedVersion();
    return older;
  };
  const uploadedVersion = async (): Promise<string> => {
    const res = await api(
      h,
      'post',
      `/workspaces/${wsVersions}/configuration-versions`,
      admin,
      versionDocument({ 'auto-queue-runs': false }),
    );
    const put = await h.http
      .put(new URL(String(res.body.data.attributes['upload-url'])).pathname)
      .set('Content-Type', 'application/octet-stream')
      .send(tarGz('resource "null_resource" "archived" {}\n'));
    if (put.status !== 200) throw new Error(`upload a configuration version: ${describeResponse(put)}`);
    return res.body.data.id as string;
  };
  const pendingVersion = (
    await api(h, 'post', `/workspaces/${wsVersions}/configuration-versions`, admin, versionDocument({ 'auto-queue-runs': false }))
  ).body.data.id as string;
  const baseVersion = await archivableVersion();
  SPECS['POST /configuration-versions/:configuration_version_id/actions/archive'] = {
    attributes: '',
    fields: { '/comment': str('text', 10_000, { nullable: true }) },
    required: [],
    success: 202,
    base: async () => ({ path: `/configuration-versions/${baseVersion}/actions/archive`, body: { comment: 'base' } }),
    fresh: async () => ({ path: `/configuration-versions/${await archivableVersion()}/actions/archive`, body: { comment: 'fresh' } }),
    failures: [
      async () => ({ path: `/configuration-versions/${pendingVersion}/actions/archive`, body: {} }),
      async () => ({ path: '/configuration-versions/cv-doesnotexist0000/actions/archive', body: {} }),
      async () => ({ path: `/configuration-versions/${await archivableVersion()}/actions/archive`, body: {}, token: teamReadToken }),
    ],
  };

  // Safe delete: the base workspace stays locked, so a valid body is refused (409) and it is never deleted.
  const safeDeleteLocked = await workspace('ws-safe-delete-locked');
  const safeDeleteLock = await api(h, 'post', `/workspaces/${safeDeleteLocked}/actions/lock`, admin, { reason: 'kept' });
  if (safeDeleteLock.status !== 200) throw new Error(`lock a workspace: ${describeResponse(safeDeleteLock)}`);
  const safeDeleteSpec = (pathOf: (id: string, name: string) => string): WriteSpec => ({
    attributes: '',
    fields: { '/comment': str('text', 10_000, { nullable: true }) },
    required: [],
    success: 204,
    base: async () => ({ path: pathOf(safeDeleteLocked, 'ws-safe-delete-locked'), body: { comment: 'base' } }),
    fresh: async () => {
      const name = uniqueName('ws-safe-delete');
      return { path: pathOf(await workspace(name), name), body: { comment: 'fresh' } };
    },
    failures: [
      async () => ({ path: pathOf(safeDeleteLocked, 'ws-safe-delete-locked'), body: {} }),
      async () => ({ path: pathOf('ws-doesnotexist00000', 'no-such-workspace'), body: {} }),
      async () => ({ path: pathOf(safeDeleteLocked, 'ws-safe-delete-locked'), body: {}, token: teamReadToken }),
    ],
  });
  SPECS['POST /workspaces/:workspace_id/actions/safe-delete'] = safeDeleteSpec((id) => `/workspaces/${id}/actions/safe-delete`);
  SPECS['POST /organizations/:organization_name/workspaces/:workspace_name/actions/safe-delete'] = safeDeleteSpec(
    (_, name) => `/organizations/${main}/workspaces/${name}/actions/safe-delete`,
  );

  // -- site admin: subscriptions, on an organization of their own (a free plan would limit run tasks) --
  const subscribed = await createOrganization(h, 'prop-subscribed');
  const subscribedToken = await createOrganizationToken(h, subscribed);
  const subscriptionDocument = (featureSet: string, attributes?: Record<string, unknown>) => ({
    data: {
      type: 'subscription',
      ...(attributes ? { attributes } : {}),
      relationships: { 'feature-set': { data: { type: 'feature-sets', id: featureSet } } },
    },
  });
  const subscriptionPath = `/admin/organizations/${subscribed}/subscription`;
  SPECS['POST /admin/organizations/:organization_name/subscription'] = {
    attributes: '/data/attributes',
    fields: {
      '/data': object(),
      // go-tfe sends the singular.
      '/data/type': oneOf(['subscription', 'subscriptions']),
      // Accepted and ignored (runs-ceiling, contract dates…), but an object.
      '/data/attributes': object(),
      ...attributeFields('/data/relationships', { '': object(), ...relationshipFields('feature-set', 'feature-sets') }),
    },
    required: ['/data', '/data/type', ...relationshipRequired('feature-set')],
    success: 201,
    base: async () => ({
      path: subscriptionPath,
      body: subscriptionDocument('fs-business', { 'runs-ceiling': 10, 'contract-start-at': '2026-01-01T00:00:00Z' }),
    }),
    fresh: async () => ({ path: subscriptionPath, body: subscriptionDocument('fs-standard', { 'runs-ceiling': 1 }) }),
    failures: [
      async () => ({ path: subscriptionPath, body: subscriptionDocument('fs-nope') }),
      async () => ({ path: '/admin/organizations/no-such-organization/subscription', body: subscriptionDocument('fs-free') }),
      // Site admin only: the organization's own owner token is answered like a missing resource.
      async () => ({ path: subscriptionPath, body: subscriptionDocument('fs-free'), token: subscribedToken }),
    ],
  };

  // -- site admin: an organization's admin settings (go-tfe sends no type: "") --
  const administered = await createOrganization(h, 'prop-administered');
  const administeredToken = await createOrganizationToken(h, administered);
  const adminPath = `/admin/organizations/${administered}`;
  const adminDocument = (flag: boolean) => ({
    data: {
      type: '',
      attributes: {
        'access-beta-tools': flag,
        'global-module-sharing': flag,
        'global-provider-sharing': !flag,
        'terraform-worker-sudo-enabled': flag,
      },
    },
  });
  SPECS['PATCH /admin/organizations/:organization_name'] = {
    attributes: '/data/attributes',
    fields: {
      ...resourceFields('organizations', {
        'access-beta-tools': bool,
        'global-module-sharing': bool,
        'global-provider-sharing': bool,
        'terraform-worker-sudo-enabled': bool,
      }),
      '/data/type': oneOf(['', 'organizations']),
    },
    required: ['/data', '/data/type'],
    success: 200,
    base: async () => ({ path: adminPath, body: adminDocument(true) }),
    fresh: async () => ({ path: adminPath, body: adminDocument(false) }),
    failures: [
      async () => ({ path: '/admin/organizations/no-such-organization', body: adminDocument(true) }),
      // Site admin only: the organization's own owner token is answered like a missing resource.
      async () => ({ path: adminPath, body: adminDocument(true), token: administeredToken }),
    ],
  };
}
