import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { RunComment } from '@runtasks/shared/db';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import {
  api,
  createRun,
  createTeam,
  createTeamToken,
  grantWorkspace,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Run comments as HCP Terraform (and go-tfe's Comment) have them: the `comments` document, the run's
 * `comments` relationship, the comments given to run actions kept on the run, who may read and write
 * them, and refusals that store nothing.
 */

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

const commentDocument = (body: unknown) => ({ data: { type: 'comments', attributes: { body } } });

describe('run comments (golden)', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  let readToken: string;
  let planToken: string;
  const countComments = (runId: string): Promise<number> => h.orm.em.fork().count(RunComment, { run: runId });

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('comments'));
    other = await seedOrganization(h, uniqueName('comments-other'));
    await grantWorkspace(h, acme.organizationToken, acme.teamId, acme.workspaceId, { access: 'read' });
    readToken = await createTeamToken(h, acme.organizationToken, acme.teamId);
    const planTeam = await createTeam(h, acme.organization, acme.organizationToken, `${acme.organization}-planners`);
    await grantWorkspace(h, acme.organizationToken, planTeam, acme.workspaceId, { access: 'plan' });
    planToken = await createTeamToken(h, acme.organizationToken, planTeam);
  });

  afterAll(async () => {
    await h?.close();
  });

  it('creates, shows and lists comments oldest first, and the run names them', async () => {
    const runId = await createRun(h, acme.organizationToken, acme.workspaceId);
    const empty = await api(h, 'get', `/runs/${runId}/comments`, acme.organizationToken);
    expect(empty.status).toBe(200);
    expect(empty.body.data).toEqual([]);
    const created = await api(h, 'post', `/runs/${runId}/comments`, acme.organizationToken, commentDocument('Looks good 🚀'));
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    expect(id).toMatch(/^wsc-[A-Za-z0-9]{16}$/);
    expect(created.body.data).toEqual({
      id,
      type: 'comments',
      attributes: { body: 'Looks good 🚀', 'created-at': ISO },
      relationships: { run: { data: { type: 'runs', id: runId } } },
      links: { self: `/api/v2/comments/${id}` },
    });
    const shown = await api(h, 'get', `/comments/${id}`, acme.organizationToken);
    expect(shown.status).toBe(200);
    expect(shown.body.data).toEqual(created.body.data);
    const second = await api(h, 'post', `/runs/${runId}/comments`, planToken, commentDocument('second'));
    expect(second.status).toBe(201);
    const listed = await api(h, 'get', `/runs/${runId}/comments`, readToken);
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((comment: { attributes: { body: string } }) => comment.attributes.body)).toEqual([
      'Looks good 🚀',
      'second',
    ]);
    expect(listed.body.meta.pagination['total-count']).toBe(2);
    const run = await api(h, 'get', `/runs/${runId}`, readToken);
    expect(run.body.data.relationships.comments).toEqual({
      data: [
        { type: 'comments', id },
        { type: 'comments', id: second.body.data.id },
      ],
    });
    const list = await api(h, 'get', `/workspaces/${acme.workspaceId}/runs`, acme.organizationToken);
    const inList = list.body.data.find((resource: { id: string }) => resource.id === runId);
    expect(inList.relationships.comments).toEqual(run.body.data.relationships.comments);
  });

  it('keeps the comment given to a run action on the run, and none when the action is refused', async () => {
    const runId = await createRun(h, acme.organizationToken, acme.workspaceId, { 'plan-only': true });
    expect((await api(h, 'post', `/runs/${runId}/actions/discard`, acme.organizationToken, { comment: 'Not today' })).status).toBe(202);
    // Discarded already: 409, and its comment is not kept.
    expectError(await api(h, 'post', `/runs/${runId}/actions/discard`, acme.organizationToken, { comment: 'again' }), 409);
    // No comment, a null one and an empty one store nothing.
    const otherRun = await createRun(h, acme.organizationToken, acme.workspaceId, { 'plan-only': true });
    expect((await api(h, 'post', `/runs/${otherRun}/actions/cancel`, acme.organizationToken, { comment: '' })).status).toBe(202);
    expect(await countComments(otherRun)).toBe(0);
    const listed = await api(h, 'get', `/runs/${runId}/comments`, acme.organizationToken);
    expect(listed.body.data.map((comment: { attributes: { body: string } }) => comment.attributes.body)).toEqual(['Not today']);
  });

  it('refuses empty, overlong and ill-typed bodies with a pointer, storing nothing', async () => {
    const runId = await createRun(h, acme.organizationToken, acme.workspaceId, { 'plan-only': true });
    const post = (body: unknown) => api(h, 'post', `/runs/${runId}/comments`, acme.organizationToken, body);
    expectError(await post(commentDocument('')), 422, '/data/attributes/body');
    expectError(await post(commentDocument('x'.repeat(10_001))), 422, '/data/attributes/body');
    expectError(await post(commentDocument(42)), 422, '/data/attributes/body');
    expectError(await post({ data: { type: 'comment', attributes: { body: 'wrong type' } } }), 422, '/data/type');
    const tooLong = await api(h, 'post', `/runs/${runId}/actions/discard`, acme.organizationToken, { comment: 'x'.repeat(10_001) });
    expectError(tooLong, 422, '/comment');
    expect(await countComments(runId)).toBe(0);
    // The longest comment is kept whole.
    expect((await post(commentDocument('y'.repeat(10_000)))).status).toBe(201);
    expect(await countComments(runId)).toBe(1);
  });

  it('reading takes reading the run; writing takes planning in its workspace (a reader gets a 403 naming it); other organizations see nothing', async () => {
    const runId = await createRun(h, acme.organizationToken, acme.workspaceId, { 'plan-only': true });
    const created = await api(h, 'post', `/runs/${runId}/comments`, acme.organizationToken, commentDocument('owners only'));
    expect((await api(h, 'get', `/comments/${created.body.data.id}`, readToken)).status).toBe(200);
    // A reader of the run lacking the runs permission is told which one it takes (docs/go-tfe.md).
    const refused = expectError(await api(h, 'post', `/runs/${runId}/comments`, readToken, commentDocument('reader')), 403);
    expect(refused.detail).toBe(
      'This token may read the run but may not comment on it: that takes the "plan" or "apply" runs permission on the workspace.',
    );
    expectNotFound(await api(h, 'get', `/comments/${created.body.data.id}`, other.organizationToken));
    expectNotFound(await api(h, 'get', `/runs/${runId}/comments`, other.organizationToken));
    expectNotFound(await api(h, 'post', `/runs/${runId}/comments`, other.organizationToken, commentDocument('outsider')));
    expectNotFound(await api(h, 'get', '/comments/wsc-doesnotexist0000', acme.organizationToken));
    expect(await countComments(runId)).toBe(1);
  });
});
