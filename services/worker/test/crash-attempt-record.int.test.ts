import { describe, expect, it } from '@jest/globals';
import type { Delivery } from '../../../test/support/scripted-server.ts';
import { startScriptedServer } from '../../../test/support/scripted-server.ts';
import {
  harness,
  invariants,
  onCleanup,
  redisClient,
  runCleanups,
  waitUntilAllFinal,
  workerEnv,
  WorkerFleet,
} from '../../../test/support/cluster.ts';
import { api, attachTask, createRun, createTask, eventually, seedOrganization } from '../../../test/support/fixtures.ts';

interface AttemptRow {
  attempt: number;
  http_status: number | null;
  error_kind: string | null;
}

/**
 * Crash test: the worker that POSTed a run task request is killed (SIGKILL) right after the task server
 * received it, before it could record the answer; the task server calls back `passed`. The attempt still
 * has its record (written with the claim, before the POST), the API lists it, and the run ends with the
 * reliability invariants holding.
 */
describe('crash tests: a delivered request keeps its attempt record when its worker dies', () => {
  it('kill -9 of the worker right after its POST: the attempt is recorded, listed, and the run completes', async () => {
    try {
      const h = await harness({});
      const fleet = new WorkerFleet(workerEnv(h));
      onCleanup(() => fleet.stop(), 'workers');
      const callbacks: number[] = [];
      let killed = false;
      const server = await startScriptedServer((delivery: Delivery, res) => {
        void (async () => {
          if (!killed) {
            killed = true;
            // The POST arrived: the worker that made it dies before it hears the answer.
            const [victim] = fleet.live();
            if (victim) await fleet.kill9(victim);
            await fleet.start().started;
          }
          res.writeHead(200).end();
          const callback = await fetch(delivery.payload.task_result_callback_url, {
            method: 'PATCH',
            headers: { authorization: `Bearer ${delivery.payload.access_token}`, 'content-type': 'application/vnd.api+json' },
            body: JSON.stringify({ data: { type: 'task-results', attributes: { status: 'passed', message: 'ok' } } }),
          });
          callbacks.push(callback.status);
        })();
      });
      onCleanup(() => server.close(), 'task server');
      const f = await seedOrganization(h, 'crash-attempt');
      await attachTask(h, f, f.workspaceId, await createTask(h, f, server.url), 'mandatory', ['pre_plan']);
      await fleet.start().started;

      const runId = await createRun(h, f.organizationToken, f.workspaceId, { 'auto-apply': true });
      await eventually(async () => (callbacks.length > 0 ? true : undefined), 60_000);
      expect(callbacks).toEqual([200]);
      await waitUntilAllFinal(h.orm, 1, 90_000, fleet);
      expect(killed).toBe(true);

      const [result] = await h.orm.em
        .fork()
        .execute<{ id: string; status: string; attempts: number }[]>(
          `select tr.id, tr.status, tr.attempts from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = ?`,
          [runId],
        );
      expect(result).toMatchObject({ status: 'passed', attempts: 1 });
      const rows = await h.orm.em
        .fork()
        .execute<AttemptRow[]>(`select attempt, http_status, error_kind from delivery_attempts where task_result_id = ? order by attempt`, [
          result?.id,
        ]);
      // Its answer was never heard: recorded as such, not missing.
      expect(rows).toEqual([{ attempt: 1, http_status: null, error_kind: 'unrecorded' }]);
      const listed = await api(h, 'get', `/task-results/${result?.id}/delivery-attempts`, f.organizationToken);
      expect(listed.status).toBe(200);
      expect(listed.body.data.map((attempt: { attributes: Record<string, unknown> }) => attempt.attributes)).toMatchObject([
        { attempt: 1, 'http-status': null, 'error-kind': 'unrecorded' },
      ]);
      // Named by its key: its result and its ordinal there.
      expect(listed.body.data.map((attempt: { id: string; type: string }) => [attempt.type, attempt.id])).toEqual([
        ['delivery-attempts', `${result?.id}.1`],
      ]);

      const redis = redisClient(h.config.redisUrl);
      const report = await invariants(h.orm, redis, h.config.queuePrefix, []);
      expect(report.violations).toEqual([]);
    } finally {
      await runCleanups();
    }
  }, 180_000);
});
