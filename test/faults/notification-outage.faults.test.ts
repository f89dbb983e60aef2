import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { setTimeout as delay } from 'node:timers/promises';
import { startRunTaskServer, type RunTaskServer } from '../../examples/run-task-server/server.ts';
import { startWorker, type RunningWorker } from '../../services/worker/src/worker.ts';
import { uniqueName } from '../support/assertions.ts';
import {
  api,
  attachTask,
  createRun,
  createTask,
  createWorkspace,
  eventually,
  seedOrganization,
  type Fixture,
} from '../support/fixtures.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { expectNoViolations } from '../support/invariants.ts';
import { startNotificationReceiver, type NotificationReceiver } from '../support/notification-receiver.ts';

/**
 * A generic webhook destination down for a minute (docs/notifications.md, "Delivery"): its port
 * refuses connections for the first half, then it answers 503 for the second, then 200. Runs created
 * in both halves finish while it is down (completion is asserted, not time: the machine is shared);
 * once it is back, each (configuration, run, trigger) has exactly one request answered 200, every
 * delivery row says delivered, a few sweeps later nothing more arrives, and the invariants hold.
 *
 * The minute is the issue's: the outage's halves are its duration, not a wait for some state. The
 * retry delays (NOTIFICATION_RETRY_DELAYS_SECONDS) are short and many, so no delivery runs out of
 * attempts within it and the one after it comes within seconds: the test takes a little over a minute.
 */

const REFUSED_MS = 30_000;
const UNAVAILABLE_MS = 30_000;
/** Attempts every 3 s once past the first few: 40 attempts cover two minutes, well past the outage even on a slow machine. */
const RETRY_DELAYS = ['0.5', '1', '2', ...Array<string>(37).fill('3')].join(',');
const WORKSPACES = 2;
const CONFIGURATIONS_PER_WORKSPACE = 2;
const RUN_TRIGGERS = ['run:created', 'run:planning', 'run:needs_attention', 'run:applying', 'run:completed', 'run:errored'];

describe('a notification destination down for a minute', () => {
  let h: Harness;
  let worker: RunningWorker;
  let taskServer: RunTaskServer;
  let destination: NotificationReceiver;
  let org: Fixture;

  beforeAll(async () => {
    h = await startHarness({
      reachableBaseUrl: true,
      env: { SWEEPER_INTERVAL_SECONDS: '0.5', TASK_RETRY_DELAYS_SECONDS: '0.2,0.2', NOTIFICATION_RETRY_DELAYS_SECONDS: RETRY_DELAYS },
    });
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
    taskServer = await startRunTaskServer({ result: 'passed', readPlan: false });
    destination = await startNotificationReceiver();
    org = await seedOrganization(h, uniqueName('outage'));
  });
  afterAll(async () => {
    await worker?.close();
    await taskServer?.close();
    await destination?.close();
    await h?.close();
  }, 30_000);

  const runStatus = async (runId: string): Promise<string> =>
    (await api(h, 'get', `/runs/${runId}`, org.organizationToken)).body.data.attributes.status as string;
  /** Runs created now, each in its own workspace; resolved once every one of them is applied. */
  const runsFinish = async (workspaceIds: readonly string[]): Promise<string[]> => {
    const runIds = await Promise.all(
      workspaceIds.map((workspaceId) => createRun(h, org.organizationToken, workspaceId, { 'auto-apply': true })),
    );
    await eventually(
      async () => ((await Promise.all(runIds.map(runStatus))).every((status) => status === 'applied') ? true : undefined),
      30_000,
      100,
    );
    return runIds;
  };
  const deliveries = (runIds: readonly string[]) =>
    h.orm.em
      .fork()
      .getConnection()
      .execute<{ configuration_id: string; run_id: string; trigger: string; occasion: string; status: string; attempts: number }[]>(
        `select configuration_id, run_id, trigger, occasion, status, attempts from notification_deliveries where run_id in (?)`,
        [[...runIds]],
      );
  const keyOf = (configuration: unknown, run: unknown, trigger: unknown): string =>
    `${String(configuration)} ${String(run)} ${String(trigger)}`;
  /** The (configuration, run, trigger) of every request the destination answered 200, with repeats. */
  const delivered = (runIds: readonly string[]): string[] =>
    destination.received
      .filter((request) => request.status === 200 && runIds.includes(String(request.body['run_id'])))
      .map((request) => {
        const [notification] = request.body['notifications'] as { trigger: string }[];
        return keyOf(request.body['notification_configuration_id'], request.body['run_id'], notification?.trigger);
      });

  it('delivers each notification exactly once after it, and runs finish during it', async () => {
    const taskId = await createTask(h, org, taskServer.url);
    const workspaceIds: string[] = [];
    for (let index = 0; index < WORKSPACES; index += 1) {
      const workspaceId = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('ws'));
      await attachTask(h, org, workspaceId, taskId, 'mandatory', ['post_plan']);
      // Enabled configurations are verified when saved: made while the destination is still up.
      for (let configuration = 0; configuration < CONFIGURATIONS_PER_WORKSPACE; configuration += 1) {
        const created = await api(h, 'post', `/workspaces/${workspaceId}/notification-configurations`, org.organizationToken, {
          data: {
            type: 'notification-configurations',
            attributes: {
              name: uniqueName('hook'),
              'destination-type': 'generic',
              enabled: true,
              url: destination.url,
              triggers: RUN_TRIGGERS,
            },
          },
        });
        expect(created.status).toBe(201);
      }
      workspaceIds.push(workspaceId);
    }
    const verifications = destination.received.length;

    // First half: connections refused. Runs created now finish while it lasts.
    await destination.down();
    const outageStarted = Date.now();
    // Each half lasts its 30 s, or longer if the (shared) machine makes the runs slower: they finish inside it.
    const refusedRuns = await runsFinish(workspaceIds);
    await eventually(async () => ((await deliveries(refusedRuns)).some((row) => row.attempts >= 2) ? true : undefined), 20_000);
    await delay(Math.max(0, REFUSED_MS - (Date.now() - outageStarted)));

    // Second half: listening again, but 503 to everything. Runs created now finish too.
    destination.answer(503);
    await destination.up();
    const unavailableStarted = Date.now();
    const unavailableRuns = await runsFinish(workspaceIds);
    await eventually(async () => (destination.received.some((request) => request.status === 503) ? true : undefined), 20_000);
    await delay(Math.max(0, UNAVAILABLE_MS - (Date.now() - unavailableStarted)));
    const runIds = [...refusedRuns, ...unavailableRuns];
    expect(delivered(runIds)).toEqual([]);
    expect(destination.received.length).toBeGreaterThan(verifications);

    // Back. Every decided delivery is delivered, each by exactly one request answered 200.
    destination.answer(200);
    const rows = await eventually(
      async () => {
        const current = await deliveries(runIds);
        return current.length > 0 && current.every((row) => row.status === 'delivered') ? current : undefined;
      },
      60_000,
      250,
    );
    // Both configurations of each run's workspace were told its creation and its completion.
    for (const trigger of ['run:created', 'run:completed']) {
      expect(rows.filter((row) => row.trigger === trigger)).toHaveLength(runIds.length * CONFIGURATIONS_PER_WORKSPACE);
    }
    const expected = rows.map((row) => keyOf(row.configuration_id, row.run_id, row.trigger)).sort();
    expect(delivered(runIds).sort()).toEqual(expected);
    // The outage cost retries, not notifications: the first half's deliveries were attempted more than once.
    expect(rows.filter((row) => refusedRuns.includes(row.run_id)).every((row) => row.attempts >= 2)).toBe(true);

    // Later sweeps and any duplicated job find the deliveries done: still once each.
    const completedJobs = async () => (await worker.queue.getJobCounts('completed')).completed ?? 0;
    const before = await completedJobs();
    await eventually(async () => ((await completedJobs()) >= before + 3 ? true : undefined), 20_000);
    expect(delivered(runIds).sort()).toEqual(expected);

    await expectNoViolations(h.orm, { runIds, quiescent: true });
  }, 240_000);
});
