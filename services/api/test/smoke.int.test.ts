import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { api, createRun, seedOrganization } from '../../../test/support/fixtures.ts';

describe('platform smoke', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  it('creates an organization, workspace and run and reads them back', async () => {
    const f = await seedOrganization(h, 'smoke');
    const runId = await createRun(h, f.organizationToken, f.workspaceId, { message: 'hello' });
    const res = await api(h, 'get', `/runs/${runId}?include=task_stages`, f.organizationToken);
    expect(res.status).toBe(200);
    expect(res.body.data.attributes.status).toBe('pending');
    const wrong = await api(h, 'put', '/ping');
    expect(wrong.status).toBe(405);
  });
});
