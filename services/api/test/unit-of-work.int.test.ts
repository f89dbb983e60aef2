import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, seedOrganization, uniqueName, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * A request's unit of work (`ctx.state.em`) is forked on first use: the routes that run prepared
 * statements on the pool (the plain reads, callbacks, run creation) never pay for one, and a route
 * that uses the ORM gets one fork for the whole request.
 */
describe('the request unit of work is forked only when used', () => {
  let h: Harness;
  let f: Fixture;
  let forks = 0;

  beforeAll(async () => {
    h = await startHarness();
    f = await seedOrganization(h, uniqueName('uow'));
    const fork = h.orm.em.fork.bind(h.orm.em);
    h.orm.em.fork = ((...args: Parameters<typeof fork>) => {
      forks += 1;
      return fork(...args);
    }) as typeof fork;
  });
  afterAll(async () => {
    await h.close();
  });

  const forksOf = async (path: string, expectedStatus: number): Promise<number> => {
    const before = forks;
    const response = await api(h, 'get', path, f.organizationToken);
    expect(response.status).toBe(expectedStatus);
    return forks - before;
  };

  it('a plain read runs on the pool without forking', async () => {
    expect(await forksOf(`/organizations/${f.organization}/tasks`, 200)).toBe(0);
    expect(await forksOf(`/task-results/taskrs-doesnotexist00`, 404)).toBe(0);
  });

  it('a route that uses the ORM forks once, however often it reads ctx.state.em', async () => {
    expect(await forksOf(`/organizations/${f.organization}`, 200)).toBe(1);
    expect(await forksOf(`/workspaces/${f.workspaceId}`, 200)).toBe(1);
  });
});
