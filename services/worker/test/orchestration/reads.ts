import { expect } from '@jest/globals';
import { type EnforcementLevel, type RunStage } from '@runtasks/shared/domain';
import { type RecordedRequest, type RunTaskPayload, type RunTaskServer } from '../../../../examples/run-task-server/server.ts';
import { api, type Fixture } from '../../../../test/support/fixtures.ts';
import { type Harness } from '../../../../test/support/harness.ts';
import { type AttemptView, type ResultView, type RunView, type StageView, TERMINAL } from './views.ts';

/** Reads of runs, stages, results and attempts through the API, and the task server's side of a run. */
export function orchestrationReads(
  g: { h: Harness },
  waitFor: <T>(check: () => Promise<T | undefined>, what: string, timeoutMs?: number) => Promise<T>,
) {
  /** Run task requests a server received (the verification request at task creation left out). */
  const runRequests = (server: RunTaskServer): RecordedRequest[] => server.requests.filter((request) => !request.verification);
  const payloadOf = (request: RecordedRequest | undefined): RunTaskPayload => {
    if (!request?.payload) throw new Error('no payload recorded');
    return request.payload;
  };

  async function getRun(owner: Fixture, runId: string): Promise<RunView> {
    const res = await api(g.h, 'get', `/runs/${runId}`, owner.organizationToken);
    if (res.status !== 200) throw new Error(`get run: ${res.status} ${res.text}`);
    const data = res.body.data;
    return {
      id: data.id,
      status: data.attributes.status,
      timestamps: data.attributes['status-timestamps'],
      warnings: data.attributes['has-task-warnings'],
      planId: data.relationships.plan.data.id,
      createdAt: data.attributes['created-at'],
      stageIds: (data.relationships['task-stages'].data as { id: string }[]).map((stage) => stage.id),
    };
  }

  async function stagesOf(owner: Fixture, runId: string): Promise<{ stages: StageView[]; results: Map<string, ResultView> }> {
    const res = await api(g.h, 'get', `/runs/${runId}/task-stages?include=task_results`, owner.organizationToken);
    if (res.status !== 200) throw new Error(`list stages: ${res.status} ${res.text}`);
    type Doc = { id: string; type: string; attributes: Record<string, unknown>; relationships: Record<string, { data: unknown }> };
    const stages = (res.body.data as Doc[]).map((doc) => ({
      id: doc.id,
      stage: doc.attributes['stage'] as RunStage,
      status: doc.attributes['status'] as string,
      timestamps: doc.attributes['status-timestamps'] as Record<string, string>,
      resultIds: (doc.relationships['task-results']?.data as { id: string }[]).map((result) => result.id),
    }));
    const results = new Map<string, ResultView>();
    for (const doc of (res.body.included ?? []) as Doc[]) {
      if (doc.type !== 'task-results') continue;
      results.set(doc.id, {
        id: doc.id,
        status: doc.attributes['status'] as string,
        taskId: doc.attributes['task-id'] as string,
        message: doc.attributes['message'] as string | null,
        enforcement: doc.attributes['workspace-task-enforcement-level'] as EnforcementLevel,
        outcomesCount: doc.attributes['task-result-outcomes-count'] as number,
        timestamps: doc.attributes['status-timestamps'] as Record<string, string>,
      });
    }
    return { stages, results };
  }

  async function stageOf(owner: Fixture, runId: string, stage: RunStage): Promise<{ stage: StageView; results: ResultView[] }> {
    const { stages, results } = await stagesOf(owner, runId);
    const found = stages.find((candidate) => candidate.stage === stage);
    if (!found) throw new Error(`run ${runId} has no ${stage} stage`);
    return { stage: found, results: found.resultIds.map((id) => results.get(id) as ResultView) };
  }

  async function getResult(owner: Fixture, resultId: string): Promise<ResultView> {
    const res = await api(g.h, 'get', `/task-results/${resultId}`, owner.organizationToken);
    if (res.status !== 200) throw new Error(`get result: ${res.status} ${res.text}`);
    const attributes = res.body.data.attributes;
    return {
      id: res.body.data.id,
      status: attributes.status,
      taskId: attributes['task-id'],
      message: attributes.message,
      enforcement: attributes['workspace-task-enforcement-level'],
      outcomesCount: attributes['task-result-outcomes-count'],
      timestamps: attributes['status-timestamps'],
    };
  }

  async function attemptsOf(owner: Fixture, resultId: string): Promise<AttemptView[]> {
    const res = await api(g.h, 'get', `/task-results/${resultId}/delivery-attempts`, owner.organizationToken);
    if (res.status !== 200) throw new Error(`delivery attempts: ${res.status} ${res.text}`);
    return (res.body.data as { attributes: AttemptView }[]).map(({ attributes }) => ({
      attempt: attributes.attempt,
      'http-status': attributes['http-status'],
      'error-kind': attributes['error-kind'],
    }));
  }

  /**
   * Waits until the run reaches `expected`, or stops early on a status it cannot leave by itself
   * (`leaving`: a status a person just moved it out of, which the workers have yet to act on).
   */
  async function runReaches(owner: Fixture, runId: string, expected: string, leaving?: string): Promise<RunView> {
    const run = await waitFor(async () => {
      const current = await getRun(owner, runId);
      const stuck = TERMINAL.has(current.status) || (current.status.endsWith('_awaiting_decision') && current.status !== leaving);
      return current.status === expected || stuck ? current : undefined;
    }, `run ${runId} to reach ${expected}`);
    expect(run.status).toBe(expected);
    return run;
  }

  async function resultReaches(owner: Fixture, resultId: string, expected: string): Promise<ResultView> {
    const result = await waitFor(async () => {
      const current = await getResult(owner, resultId);
      return current.status === expected || !['pending', 'running'].includes(current.status) ? current : undefined;
    }, `result ${resultId} to reach ${expected}`);
    expect(result.status).toBe(expected);
    return result;
  }

  /** The request a server received, once it has answered it. */
  const answeredRequest = (server: RunTaskServer, index = 0): Promise<RecordedRequest> =>
    waitFor(async () => {
      const request = runRequests(server)[index];
      return request?.status !== undefined ? request : undefined;
    }, `task server request ${index} to be answered`);

  /** Every callback the server meant to make has an answer. */
  const callbacksAnswered = (server: RunTaskServer, count: number): Promise<RecordedRequest> =>
    waitFor(async () => {
      const request = runRequests(server)[0];
      const calls = request?.callbacks ?? [];
      return calls.length >= count && calls.every((call) => call.status !== null || call.error !== undefined) ? request : undefined;
    }, `${count} callback(s) answered`);

  function callback(resultId: string, token: string | undefined, body: unknown) {
    let req = g.h.http.patch(`/api/v2/task-results/${resultId}/callback`).set('Content-Type', 'application/vnd.api+json');
    if (token !== undefined) req = req.set('Authorization', `Bearer ${token}`);
    return req.send(JSON.stringify(body));
  }

  const verdict = (status: string, extra: Record<string, unknown> = {}) => ({
    data: { type: 'task-results', attributes: { status, message: `reported ${status}`, ...extra } },
  });

  /** GET an absolute URL (as a task server would) with a bearer token. */
  async function getWithToken(url: string, token: string): Promise<{ status: number; body: unknown }> {
    const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: response.status, body };
  }
  return {
    runRequests,
    payloadOf,
    getRun,
    stagesOf,
    stageOf,
    getResult,
    attemptsOf,
    runReaches,
    resultReaches,
    answeredRequest,
    callbacksAnswered,
    callback,
    verdict,
    getWithToken,
  };
}
