import { api, createTeam, createTeamToken, createWorkspace, grantWorkspace } from '../../../../test/support/fixtures.ts';
import { list, literal, object, str, type WriteSpec } from './model.ts';
import { describeResponse } from './hostile.ts';
import { type Fixtures } from './fixtures.ts';

/** WriteSpecs: workspace and organization tags, and remote state consumers. */
export async function addTagAndConsumerSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures): Promise<void> {
  await addTagSpecs(SPECS, f);
  await addConsumerSpecs(SPECS, f);
}

/** A workspace's tags (by name or id), and a tag's workspaces (by id); both answer 204 and are idempotent. */
async function addTagSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures): Promise<void> {
  const { admin, h, wsMain, wsTasks, wsOther } = f;
  const tagged = await api(h, 'post', `/workspaces/${wsMain}/relationships/tags`, admin, {
    data: [{ type: 'tags', attributes: { name: 'prop-tag' } }],
  });
  if (tagged.status !== 204) throw new Error(`tag ws-main: ${describeResponse(tagged)}`);
  const tagId = (await api(h, 'get', `/workspaces/${wsMain}/relationships/tags`, admin)).body.data[0].id as string;
  const tagList = (...entries: Record<string, unknown>[]) => ({ data: entries.map((entry) => ({ type: 'tags', ...entry })) });
  SPECS['POST /workspaces/:workspace_id/relationships/tags'] = {
    attributes: '/data/0/attributes',
    fields: {
      '/data': list(),
      '/data/0': object(),
      '/data/0/type': literal('tags'),
      '/data/0/attributes': object(),
      // Tag names allow colons too; every wrong name of the model is wrong for a tag as well.
      '/data/0/attributes/name': str('name', 255),
      '/data/1': object(),
      '/data/1/type': literal('tags'),
      '/data/1/id': str('id', 64),
    },
    // Members of list items cannot be dropped by this file's mutations (only set).
    required: ['/data'],
    success: 204,
    base: async () => ({
      path: `/workspaces/${wsMain}/relationships/tags`,
      body: tagList({ attributes: { name: 'prop-tag' } }, { id: tagId }),
    }),
    fresh: async () => ({ path: `/workspaces/${wsMain}/relationships/tags`, body: tagList({ attributes: { name: 'team:prop_2-b' } }) }),
    failures: [
      async () => ({
        path: `/workspaces/${wsMain}/relationships/tags`,
        body: tagList({ attributes: { name: 'unsaved' } }, { id: 'tag-doesnotexist0000' }),
      }),
      async () => ({ path: '/workspaces/ws-doesnotexist00000/relationships/tags', body: tagList({ attributes: { name: 'nowhere' } }) }),
    ],
  };
  const workspaceList = (...ids: string[]) => ({ data: ids.map((id) => ({ type: 'workspaces', id })) });
  SPECS['POST /tags/:tag_id/relationships/workspaces'] = {
    attributes: '/data/0',
    fields: { '/data': list(), '/data/0': object(), '/data/0/type': literal('workspaces'), '/data/0/id': str('id', 64) },
    required: ['/data'],
    success: 204,
    base: async () => ({ path: `/tags/${tagId}/relationships/workspaces`, body: workspaceList(wsMain) }),
    fresh: async () => ({ path: `/tags/${tagId}/relationships/workspaces`, body: workspaceList(wsTasks, wsMain) }),
    failures: [
      async () => ({ path: `/tags/${tagId}/relationships/workspaces`, body: workspaceList(wsTasks, 'ws-doesnotexist00000') }),
      async () => ({ path: `/tags/${tagId}/relationships/workspaces`, body: workspaceList(wsOther) }),
      async () => ({ path: '/tags/tag-doesnotexist0000/relationships/workspaces', body: workspaceList(wsMain) }),
    ],
  };
}

/** Remote state consumers: the base names the consumer the subject already has, so an accepted mutated base changes nothing. */
async function addConsumerSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures): Promise<void> {
  const { admin, h, main, patched, workspace } = f;
  const consumersPath = (id: string) => `/workspaces/${id}/relationships/remote-state-consumers`;
  const consumersDocument = (...ids: string[]) => ({ data: ids.map((id) => ({ type: 'workspaces', id })) });
  const rscSubject = await workspace('ws-rsc-subject');
  const rscConsumer = await workspace('ws-rsc-consumer');
  const rscAdded = await api(h, 'post', consumersPath(rscSubject), admin, consumersDocument(rscConsumer));
  if (rscAdded.status !== 204) throw new Error(`add a remote state consumer: ${describeResponse(rscAdded)}`);
  // Changes are refused while a workspace shares its state with the whole organization.
  const rscGlobal = await workspace('ws-rsc-global');
  const rscGlobalSet = await api(h, 'patch', `/workspaces/${rscGlobal}`, admin, {
    data: { type: 'workspaces', attributes: { 'global-remote-state': true } },
  });
  if (rscGlobalSet.status !== 200) throw new Error(`set global-remote-state: ${describeResponse(rscGlobalSet)}`);
  const rscForeign = await createWorkspace(h, patched, admin, 'ws-rsc-foreign');
  // A team that may read the subject, not change it.
  const teamRead = await createTeam(h, main, admin, 'team-rsc-read');
  await grantWorkspace(h, admin, teamRead, rscSubject, { access: 'read' });
  const teamReadToken = await createTeamToken(h, admin, teamRead);
  const consumersSpec = (): WriteSpec => ({
    attributes: '',
    fields: {
      '/data': list(),
      '/data/0': object(),
      '/data/0/type': literal('workspaces'),
      '/data/0/id': str('id', 64, { nonEmpty: true }),
    },
    required: ['/data', '/data/0/type', '/data/0/id'],
    success: 204,
    base: async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscConsumer) }),
    fresh: async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscConsumer) }),
    failures: [
      async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscConsumer, 'ws-doesnotexist00000') }),
      async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscForeign) }),
      async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscSubject) }),
      async () => ({ path: consumersPath(rscSubject), body: consumersDocument() }),
      async () => ({ path: consumersPath(rscGlobal), body: consumersDocument(rscConsumer) }),
      async () => ({ path: consumersPath('ws-doesnotexist00000'), body: consumersDocument(rscConsumer) }),
      // Read access is not enough to change them.
      async () => ({ path: consumersPath(rscSubject), body: consumersDocument(rscConsumer), token: teamReadToken }),
    ],
  });
  SPECS['POST /workspaces/:workspace_id/relationships/remote-state-consumers'] = consumersSpec();
  SPECS['PATCH /workspaces/:workspace_id/relationships/remote-state-consumers'] = consumersSpec();
}
