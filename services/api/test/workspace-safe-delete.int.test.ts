import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { api, createRun, createWorkspace, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/** Safe delete by id and by name: deleted while unlocked, refused with 409 while a person or a run locks it. */
describe('workspace safe delete', () => {
  let h: Harness;
  let acme: Fixture;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('safe'));
  });
  afterAll(async () => {
    await h.close();
  });

  const newWorkspace = async (): Promise<[string, string]> => {
    const name = uniqueName('doomed');
    return [await createWorkspace(h, acme.organization, acme.organizationToken, name), name];
  };
  const byId = (id: string) => `/workspaces/${id}/actions/safe-delete`;
  const byName = (name: string) => `/organizations/${acme.organization}/workspaces/${name}/actions/safe-delete`;

  it('deletes an unlocked workspace with no body, by id and by name', async () => {
    for (const pathOf of [(id: string) => byId(id), (_: string, name: string) => byName(name)]) {
      const [id, name] = await newWorkspace();
      const res = await api(h, 'post', pathOf(id, name), acme.organizationToken);
      expect([res.status, res.text]).toEqual([204, '']);
      expectNotFound(await api(h, 'get', `/workspaces/${id}`, acme.organizationToken));
      expectNotFound(await api(h, 'post', pathOf(id, name), acme.organizationToken));
    }
  });

  it('refuses a locked workspace with 409 and keeps it; a run holding it locks it too', async () => {
    const [id, name] = await newWorkspace();
    expect((await api(h, 'post', `/workspaces/${id}/actions/lock`, acme.organizationToken)).status).toBe(200);
    for (const path of [byId(id), byName(name)]) {
      const refused = expectError(await api(h, 'post', path, acme.organizationToken), 409);
      expect(refused.detail).toContain('Workspace is currently locked');
    }
    expect((await api(h, 'post', `/workspaces/${id}/actions/unlock`, acme.organizationToken)).status).toBe(200);

    const run = await createRun(h, acme.organizationToken, id);
    expectError(await api(h, 'post', byId(id), acme.organizationToken), 409);
    expect((await api(h, 'get', `/workspaces/${id}`, acme.organizationToken)).status).toBe(200);
    expect((await api(h, 'post', `/runs/${run}/actions/discard`, acme.organizationToken)).status).toBe(202);
    expect((await api(h, 'post', byId(id), acme.organizationToken)).status).toBe(204);
  });

  it('refuses a body that is not an object and an unknown workspace, deleting nothing', async () => {
    const [id] = await newWorkspace();
    expectError(await api(h, 'post', byId(id), acme.organizationToken, { comment: 42 }), 422, '/comment');
    expectNotFound(await api(h, 'post', byId('ws-doesnotexist00000'), acme.organizationToken));
    expect((await api(h, 'get', `/workspaces/${id}`, acme.organizationToken)).status).toBe(200);
  });
});
