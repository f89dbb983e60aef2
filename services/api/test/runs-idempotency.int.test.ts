import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import {
  api,
  patiently,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  JSON_API,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * `POST /runs` with an Idempotency-Key: a pipeline that retries its step finds the run its first try
 * created. With the defaults a user has (rate limiting on), on real PostgreSQL.
 */
describe('creating a run with an Idempotency-Key', () => {
  let h: Harness;
  let acme: Fixture;

  beforeAll(async () => {
    h = await startHarness({ ops: true });
    acme = await seedOrganization(h, uniqueName('idem'));
  });
  afterAll(async () => {
    await h.close();
  });

  const runBody = (workspaceId: string, attributes: Record<string, unknown> = {}) => ({
    data: { type: 'runs', attributes, relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } } },
  });
  const post = (body: unknown, key?: string, token = acme.organizationToken) => {
    const request = h.http.post('/api/v2/runs').set('Authorization', `Bearer ${token}`).set('Content-Type', JSON_API);
    return patiently((key === undefined ? request : request.set('Idempotency-Key', key)).send(JSON.stringify(body)));
  };
  const runsWithKey = async (key: string): Promise<string[]> =>
    (await h.orm.em.fork().execute<{ id: string }[]>(`select id from runs where idempotency_key = ? order by id`, [key])).map(
      (row) => row.id,
    );
  const newWorkspace = (label: string) => createWorkspace(h, acme.organization, acme.organizationToken, uniqueName(label));

  it('creates the run once: the same request again answers 200 with that run as it is now', async () => {
    const workspaceId = await newWorkspace('retry');
    const key = uniqueName('github-1234-1');
    const first = await post(runBody(workspaceId, { message: 'abc123' }), key);
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await post(runBody(workspaceId, { message: 'abc123' }), key);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data.id).toBe(first.body.data.id);
    expect(again.body.data).toEqual((await api(h, 'get', `/runs/${first.body.data.id}`, acme.organizationToken)).body.data);
    expect(await runsWithKey(key)).toEqual([first.body.data.id]);

    // The same body with its members in another order is the same request.
    const reordered = {
      data: {
        relationships: { workspace: { data: { id: workspaceId, type: 'workspaces' } } },
        attributes: { message: 'abc123' },
        type: 'runs',
      },
    };
    expect((await post(reordered, key)).body.data.id).toBe(first.body.data.id);
  });

  it('refuses the same key with another body (422 naming the run), and keeps keys apart per workspace', async () => {
    const workspaceId = await newWorkspace('reuse');
    const key = uniqueName('ci-job-77');
    const first = await post(runBody(workspaceId, { message: 'one' }), key);
    expect(first.status).toBe(201);
    const other = expectError(await post(runBody(workspaceId, { message: 'two' }), key), 422);
    expect(other).toMatchObject({
      title: 'idempotency key reused',
      source: { header: 'Idempotency-Key' },
      meta: { 'run-id': first.body.data.id },
    });
    expect(other.detail).toContain(first.body.data.id);
    expect(await runsWithKey(key)).toEqual([first.body.data.id]);

    const elsewhere = await post(runBody(await newWorkspace('reuse-other'), { message: 'one' }), key);
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.body.data.id).not.toBe(first.body.data.id);
  });

  it('of concurrent requests with one key, exactly one creates the run and the others find it', async () => {
    const workspaceId = await newWorkspace('race');
    const key = uniqueName('race');
    const answers = await Promise.all([1, 2, 3, 4, 5].map(() => post(runBody(workspaceId), key)));
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 200, 200, 200, 201]);
    const ids = new Set(answers.map((answer) => answer.body.data.id as string));
    expect(ids.size).toBe(1);
    expect(await runsWithKey(key)).toEqual([...ids]);
  });

  it.each([
    ['empty', ''],
    ['with a space', 'two words'],
    ['too long', 'k'.repeat(256)],
  ])('refuses a key %s (400 at the header), creating nothing', async (_label, key) => {
    const workspaceId = await newWorkspace('bad-key');
    expect(expectError(await post(runBody(workspaceId), key), 400).source).toEqual({ header: 'Idempotency-Key' });
    expect((await api(h, 'get', `/workspaces/${workspaceId}/runs`, acme.organizationToken)).body.data).toEqual([]);
  });

  it('finds nothing for a caller who may not plan there: 404 for no access, 403 naming the permission for a reader', async () => {
    const workspaceId = await newWorkspace('scoped');
    const key = uniqueName('scoped');
    const created = await post(runBody(workspaceId), key);
    expect(created.status).toBe(201);
    const other = await seedOrganization(h, uniqueName('other'));
    expectNotFound(await post(runBody(workspaceId), key, other.organizationToken));
    const readers = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('readers'));
    await grantWorkspace(h, acme.organizationToken, readers, workspaceId, { access: 'read' });
    const readerToken = await createTeamToken(h, acme.organizationToken, readers);
    const refused = expectError(await post(runBody(workspaceId), key, readerToken), 403);
    expect(refused.detail).toBe(
      'This token may read the workspace but may not queue runs in it: that takes the "plan" or "apply" runs permission on the workspace.',
    );
    const strangers = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('strangers'));
    expectNotFound(await post(runBody(workspaceId), undefined, await createTeamToken(h, acme.organizationToken, strangers)));
    expect(await runsWithKey(key)).toEqual([created.body.data.id]);
  });

  it('a run created without a key is never found by one', async () => {
    const workspaceId = await newWorkspace('keyless');
    const keyless = await createRun(h, acme.organizationToken, workspaceId);
    const keyed = await post(runBody(workspaceId), uniqueName('fresh'));
    expect(keyed.status).toBe(201);
    expect(keyed.body.data.id).not.toBe(keyless);
  });
});
