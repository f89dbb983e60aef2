import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { type RunningWorker, startWorker } from '../services/worker/src/worker.ts';
import { uniqueName } from './support/assertions.ts';
import { api, createRun, eventually, type Fixture, seedOrganization } from './support/fixtures.ts';
import { type Harness, startHarness } from './support/harness.ts';
import { corpusText } from './fixtures/plans/corpus.ts';
import { CORPUS } from './fixtures/plans/expected.ts';

/**
 * Every plan of the corpus (test/fixtures/plans) as a pipeline reports it: a run of a `local` workspace
 * waits at `planning`, the plan JSON is put at `/runs/:id/plan/json-output`, and the run's plan reads
 * back exactly the counts of the corpus's table. The API as a user runs it (rate limits and all), a
 * worker, real PostgreSQL and Redis.
 */
describe('the plan corpus, reported by a pipeline and counted by the service', () => {
  let h: Harness;
  let worker: RunningWorker;
  let f: Fixture;
  beforeAll(async () => {
    // With the service's operations on, but a rate limit above what 30 plans reported back to back and
    // polled ask of one token in a second (the limit has its own tests).
    h = await startHarness({ ops: true, env: { RATE_LIMIT_PER_SECOND: '1000' } });
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
    f = await seedOrganization(h, 'plan-corpus');
  });
  afterAll(async () => {
    await worker?.close();
    await h?.close();
  });

  const statusOf = async (runId: string): Promise<string> =>
    (await api(h, 'get', `/runs/${runId}`, f.organizationToken)).body.data.attributes.status as string;

  it.each(CORPUS.map((plan) => [plan.file, plan] as const))('%s', async (_, plan) => {
    // A workspace per plan: a run that has changes waits for its confirmation, holding its workspace.
    const workspace = await api(h, 'post', `/organizations/${f.organization}/workspaces`, f.organizationToken, {
      data: { type: 'workspaces', attributes: { name: uniqueName('corpus'), 'execution-mode': 'local' } },
    });
    expect(workspace.status).toBe(201);
    const runId = await createRun(h, f.organizationToken, workspace.body.data.id as string);
    await eventually(async () => ((await statusOf(runId)) === 'planning' ? true : undefined), 20_000);

    const text = corpusText(plan);
    const reported = await h.http
      .put(`/api/v2/runs/${runId}/plan/json-output`)
      .set('Authorization', `Bearer ${f.organizationToken}`)
      .set('Content-Type', 'application/json')
      .send(text);
    expect(reported.status).toBe(200);

    const shown = await api(h, 'get', `/runs/${runId}/plan`, f.organizationToken);
    expect(shown.status).toBe(200);
    const counted = plan.errored
      ? { status: 'errored', additions: 0, changes: 0, destructions: 0, imports: 0, hasChanges: false }
      : { status: 'finished', ...plan };
    expect(shown.body.data.attributes).toMatchObject({
      status: counted.status,
      'resource-additions': counted.additions,
      'resource-changes': counted.changes,
      'resource-destructions': counted.destructions,
      'resource-imports': counted.imports,
      'has-changes': counted.hasChanges,
      // The very bytes of the corpus file were taken.
      'plan-json-sha256': createHash('sha256').update(text).digest('hex'),
    });
    // Where it has changes, the run (with no post-plan task) waits to be confirmed; where not, it ends as a plan without changes.
    const ended = plan.errored ? 'errored' : plan.hasChanges ? 'planned' : 'planned_and_finished';
    await eventually(async () => ((await statusOf(runId)) === ended ? true : undefined), 20_000);
  });
});
