import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { JOBS } from '@runtasks/shared/queue';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { api, eventually, seedOrganization } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startWorker, type RunningWorker } from '../src/worker.ts';

const TASKS = 3;

/**
 * A stage's results share one progress deadline, woken by one delayed `task.deadline` job for the
 * stages started together (not one per result). The sweeper runs every ten minutes here, so only that job can end them.
 * Their first delivery attempts are made by the job that started the stage, without a job of their own.
 */
describe('the progress deadline of a stage', () => {
  let h: Harness;
  let worker: RunningWorker;
  let silent: Server;
  let requests = 0;

  beforeAll(async () => {
    h = await startHarness({ reachableBaseUrl: true, env: { SWEEPER_INTERVAL_SECONDS: '600', TASK_PROGRESS_TIMEOUT_SECONDS: '1' } });
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
    // Acknowledges every request (the verification's too) and never calls back.
    silent = createServer((req, res) => {
      requests += 1;
      req.resume();
      req.on('end', () => res.writeHead(200).end());
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  });

  afterAll(async () => {
    await worker.close();
    await new Promise((resolve) => silent.close(resolve));
    await h.close();
  });

  it('delivers the results of a stage without dispatch jobs, and ends every silent one with one job, and the run with them', async () => {
    const f = await seedOrganization(h, 'stage-deadline');
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/`;
    for (let index = 0; index < TASKS; index += 1) {
      const task = await api(h, 'post', `/organizations/${f.organization}/tasks`, f.organizationToken, {
        data: { type: 'tasks', attributes: { name: `silent-${index}`, url, category: 'task' } },
      });
      expect(task.status).toBe(201);
      const attached = await api(h, 'post', `/workspaces/${f.workspaceId}/tasks`, f.organizationToken, {
        data: {
          type: 'workspace-tasks',
          attributes: { 'enforcement-level': 'mandatory', stages: ['post_plan'] },
          relationships: { task: { data: { type: 'tasks', id: task.body.data.id } } },
        },
      });
      expect(attached.status).toBe(201);
    }
    const verifications = requests;
    const run = await api(h, 'post', '/runs', f.organizationToken, {
      data: { type: 'runs', relationships: { workspace: { data: { type: 'workspaces', id: f.workspaceId } } } },
    });
    expect(run.status).toBe(201);
    const [stageId] = run.body.data.relationships['task-stages'].data.map((stage: { id: string }) => stage.id) as string[];

    const ended = await eventually(async () => {
      const response = await api(h, 'get', `/runs/${run.body.data.id}`, f.organizationToken);
      return response.body.data.attributes.status === 'errored' ? response.body.data : undefined;
    }, 15_000);
    expect(ended.attributes.status).toBe('errored');
    // Every task was called once, and each result ended by the deadline, not by delivery.
    expect(requests - verifications).toBe(TASKS);
    const rows = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ status: string; message: string; attempts: number; delivered: number }[]>(
        `select status, message, attempts, (select count(*)::int from delivery_attempts d where d.task_result_id = tr.id) as delivered
           from task_results tr where task_stage_id = ?`,
        [stageId],
      );
    expect(rows).toHaveLength(TASKS);
    for (const row of rows) {
      expect(row.status).toBe('errored');
      expect(row.message).toBe('The run task sent no progress within its progress timeout.');
      expect([row.attempts, row.delivered]).toEqual([1, 1]);
    }
    // One deadline job for the stage (the only one started here), none for its results, and no dispatch job at all.
    const jobs = await worker.queue.getJobs(['completed', 'delayed', 'waiting', 'active', 'failed']);
    expect(jobs.filter((job) => job.name === JOBS.taskDeadline).map((job) => [job.id, job.data])).toEqual([
      [`task-deadline.${stageId}`, { stageIds: [stageId] }],
    ]);
    expect(jobs.filter((job) => job.name === JOBS.taskDispatch).map((job) => job.id)).toEqual([]);
  });
});
