import { randomBytes } from 'node:crypto';
import { log, sleep, type Options } from './env.ts';
import { describeLatency, openSample, type LatencySample } from './latency.ts';
import { measuredSample, pipelineResult, warmUp, type PipelineConfig, type PipelineResult, type PipelineSample } from './pipeline.ts';
import { startCountingReceiver } from './receiver.ts';
import { seedNotificationConfigurations, seedPipelineOrg } from './seed.ts';
import { Stack } from './stack.ts';

/** The open loop's rate and length beside the bursts: H2's rate, well under what the burst reaches with notifications. */
export const OPEN_RATE = 20;
const openSeconds = (options: Options): number => (options.quick ? 3 : 15);
/** How long the notifications of an open-loop sample may take to arrive after its runs are final. */
const SETTLE_LIMIT_MS = 30_000;

export interface NotificationsResult {
  without: PipelineResult;
  with: PipelineResult;
  deliveredPerRun: number[];
  /**
   * The same runs at a steady OPEN_RATE runs/s, interleaved (none, N, none, …): whether a run that does
   * not have to share saturated cores with its notifications is slowed by them.
   */
  open: { rate: number; seconds: number; without: LatencySample[]; with: LatencySample[] };
}

/**
 * H1 with notifications (`--notifications=N`): one stack (the same API and worker processes), two
 * organizations with the same tasks and workspaces, one with N enabled generic notification
 * configurations per workspace pointing at a counting receiver on loopback and one with none, their
 * samples interleaved (none, N, none, …) so the machine getting busier or quieter moves both alike.
 * A sample with notifications ends when its runs are final and every notification they gave was
 * delivered (nothing left unpublished in the outbox or pending in `notification_deliveries`, and the
 * receiver has at least created and completed for every run and configuration): its CPU per run
 * includes delivering them; its runs/s is still the runs' own (first creation to last `applied-at`).
 * Then the same at a steady OPEN_RATE runs/s (open loop, as H2): a burst saturates both cores, so there
 * every delivery's CPU is taken from the runs; below saturation a run's latency says whether its
 * notifications slow it.
 */
export async function runPipelineWithNotifications(
  config: PipelineConfig,
  perWorkspace: number,
  options: Options,
): Promise<NotificationsResult> {
  const without: PipelineConfig = { ...config, key: `${config.key}n0`, label: `${config.label}, no notifications`, notifications: 0 };
  const withSome: PipelineConfig = {
    ...config,
    key: `${config.key}n${perWorkspace}`,
    label: `${config.label}, ${perWorkspace} notification configurations per workspace`,
    notifications: perWorkspace,
  };
  log(`${withSome.label}, interleaved with none: starting API, ${config.workers} worker(s), task server, load generator, receiver`);
  const receiver = await startCountingReceiver();
  const stack = await Stack.start({ workers: config.workers, profile: options.profile });
  try {
    const suffix = randomBytes(3).toString('hex');
    const orgWithout = await seedPipelineOrg(stack, `b-${without.key}-${suffix}`.toLowerCase(), config.tasks, config.workspaces);
    const orgWith = await seedPipelineOrg(stack, `b-${withSome.key}-${suffix}`.toLowerCase(), config.tasks, config.workspaces);
    const seeded = await seedNotificationConfigurations(stack, orgWith.workspaces, perWorkspace, receiver.url);
    log(`  seeded two organizations of ${orgWith.workspaces.length} workspaces; ${seeded} notification configurations in one`);
    let expected = 0;
    let countBefore = 0;
    /** Runs final: now the notifications they gave must all be delivered (see above). */
    const settled = async (): Promise<boolean> => {
      const { rows } = await stack.db.query<{ waiting: string; delivered: string }>(
        `select (select count(*) from outbox_events where published_at is null) + (select count(*) from notification_deliveries where status = 'pending') as waiting,
                (select count(*) from notification_deliveries where status = 'delivered') as delivered`,
      );
      return Number(rows[0]?.waiting) === 0 && receiver.count() - countBefore >= expected && Number(rows[0]?.delivered) >= expected;
    };
    /** Sets what `settled` waits for (every run tells each configuration at least its creation and completion), then measures. */
    const expecting = (runs: number): void => {
      expected = runs * perWorkspace * 2;
      countBefore = receiver.count();
    };
    const warmWithout = await warmUp(stack, orgWithout, without, options);
    expecting(options.quick ? 40 : Math.round(1500 / config.tasks));
    const warmWith = await warmUp(stack, orgWith, withSome, options, settled);
    log(`  warm-up delivered ${receiver.count() - countBefore} notifications`);
    const runs = Math.min(warmWithout.runs, warmWith.runs);
    const samplesWithout: PipelineSample[] = [];
    const samplesWith: PipelineSample[] = [];
    const deliveredPerRun: number[] = [];
    for (let index = 0; index < 3; index += 1) {
      samplesWithout.push(await measuredSample(stack, orgWithout, without, runs, options, index));
      expecting(runs);
      const sample = await measuredSample(stack, orgWith, withSome, runs, options, index, settled);
      samplesWith.push(sample);
      // A re-measured sample (foreign CPU) delivered twice the runs' notifications: counted per run measured.
      const delivered = receiver.count() - countBefore;
      deliveredPerRun.push(delivered / Math.max(1, sample.retried ? sample.completed * 2 : sample.completed));
      log(`    ${delivered} notifications delivered`);
    }
    const open: NotificationsResult['open'] = { rate: OPEN_RATE, seconds: openSeconds(options), without: [], with: [] };
    for (let index = 0; index < 3; index += 1) {
      const plain = await openSample(stack, orgWithout, OPEN_RATE, open.seconds);
      log(`  open loop ${index + 1} (0 notification configurations per workspace): ${describeLatency(plain)}`);
      open.without.push(plain);
      countBefore = receiver.count();
      const notified = await openSample(stack, orgWith, OPEN_RATE, open.seconds);
      expected = notified.runs * perWorkspace * 2;
      // The next sample starts once these runs' notifications are delivered, so it does not pay for them.
      const deadline = Date.now() + SETTLE_LIMIT_MS;
      while (!(await settled()) && Date.now() < deadline) await sleep(50);
      log(`  open loop ${index + 1} (${perWorkspace} notification configurations per workspace): ${describeLatency(notified)}`);
      open.with.push(notified);
    }
    return {
      without: pipelineResult(without, warmWithout.result, samplesWithout),
      with: pipelineResult(withSome, warmWith.result, samplesWith),
      deliveredPerRun,
      open,
    };
  } finally {
    await stack.stop();
    await receiver.close();
  }
}
