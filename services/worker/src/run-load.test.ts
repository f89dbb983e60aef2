import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { RunLoad, sampledLoopUtilization } from './run-load.ts';

/** A run job that holds its slot until released. */
function heldJob(): { promise: Promise<string>; release: () => void } {
  let release = (): void => undefined;
  const promise = new Promise<string>((resolve) => {
    release = () => resolve('run done');
  });
  return { promise, release };
}

/** An event loop that has been working all along, as under a burst that saturates the machine. */
const cpuBound = (): number => 1;

/** Lets every settled promise's continuation run. */
const settle = async (): Promise<void> => {
  for (let index = 0; index < 10; index += 1) await Promise.resolve();
};

/** The run engine's processor over held jobs, counted by `load`. */
const runner = (load: RunLoad) => load.counting((job: { promise: Promise<string> }) => job.promise);

/** A notification sent behind `load`: which ones have started, and its promise. */
function notifyBehind(load: RunLoad, maxWaitMs?: number): { started: string[]; notifying: Promise<string> } {
  const started: string[] = [];
  const notifying = load.behind(async (id: string) => {
    started.push(id);
    return id;
  }, maxWaitMs)('n1');
  return { started, notifying };
}

describe('RunLoad: notifications give way to a busy run engine', () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  it('counts run jobs in progress and is busy from half its concurrency on', async () => {
    const load = new RunLoad(4, cpuBound);
    const run = runner(load);
    const [first, second] = [heldJob(), heldJob()];
    const running = [run(first), run(second)];
    expect([load.inProgress, load.busy]).toEqual([2, true]);
    first.release();
    await running[0];
    expect([load.inProgress, load.busy]).toEqual([1, false]);
    second.release();
    await expect(running[1]).resolves.toBe('run done');
    expect(load.inProgress).toBe(0);
  });

  it('starts a notification at once while the run engine has room', async () => {
    const load = new RunLoad(16, cpuBound);
    const notify = load.behind(async (id: string) => `sent ${id}`);
    await expect(notify('n1')).resolves.toBe('sent n1');
  });

  it('holds a notification while the run engine is busy and starts it as soon as a run job ends', async () => {
    const load = new RunLoad(2, cpuBound);
    const run = runner(load);
    const held = heldJob();
    const running = run(held);
    const { started, notifying } = notifyBehind(load);
    await settle();
    expect(started).toEqual([]);
    held.release();
    await running;
    await expect(notifying).resolves.toBe('n1');
    expect(started).toEqual(['n1']);
  });

  it('keeps holding a notification until a quarter of the run slots or less is in progress, not at the first dip', async () => {
    const load = new RunLoad(8, cpuBound);
    const run = runner(load);
    const held = [heldJob(), heldJob(), heldJob(), heldJob()];
    const running = held.map((job) => run(job));
    expect(load.busy).toBe(true);
    const { started, notifying } = notifyBehind(load);
    held[0]?.release();
    await running[0];
    await settle();
    // Three of eight in progress: not busy any more (a new notification would start), but this one waits on.
    expect([load.busy, started]).toEqual([false, []]);
    held[1]?.release();
    await running[1];
    await expect(notifying).resolves.toBe('n1');
    held.slice(2).forEach((job) => job.release());
    await Promise.all(running);
  });

  it('starts a notification at once while run jobs fill their slots but the event loop is idle (slow task servers)', async () => {
    const load = new RunLoad(2, () => 0.1);
    const run = runner(load);
    const held = [heldJob(), heldJob()];
    const running = held.map((job) => run(job));
    expect([load.inProgress, load.busy]).toEqual([2, false]);
    await expect(load.behind(async (id: string) => `sent ${id}`)('n1')).resolves.toBe('sent n1');
    held.forEach((job) => job.release());
    await Promise.all(running);
  });

  it('lets a held notification go once the event loop has time again, though no run job ends', async () => {
    jest.useFakeTimers();
    let utilization = 1;
    const load = new RunLoad(1, () => utilization);
    const run = runner(load);
    const held = heldJob();
    void run(held);
    const { started, notifying } = notifyBehind(load);
    jest.advanceTimersByTime(1_000);
    await settle();
    expect(started).toEqual([]);
    utilization = 0.2;
    jest.advanceTimersByTime(100);
    await expect(notifying).resolves.toBe('n1');
    expect(load.inProgress).toBe(1);
    held.release();
  });

  it('never holds a notification longer than its bound, however busy the run engine stays', async () => {
    jest.useFakeTimers();
    const load = new RunLoad(1, cpuBound);
    const run = runner(load);
    const held = heldJob();
    void run(held);
    const { started, notifying } = notifyBehind(load, 5_000);
    jest.advanceTimersByTime(4_999);
    await settle();
    expect(started).toEqual([]);
    jest.advanceTimersByTime(1);
    await expect(notifying).resolves.toBe('n1');
    expect(load.busy).toBe(true);
    held.release();
  });

  it("samples the event loop's working share: near all of it while the loop is kept busy", async () => {
    const loop = sampledLoopUtilization();
    try {
      const deadline = Date.now() + 5_000;
      // Busy for whole sampling intervals at a time, yielding between them so the sampler's timer runs.
      while (loop.utilization() < 0.5 && Date.now() < deadline) {
        const until = Date.now() + 150;
        while (Date.now() < until) Math.sqrt(Math.random());
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(loop.utilization()).toBeGreaterThanOrEqual(0.5);
    } finally {
      loop.stop();
    }
  });
});
