import { describe, expect, it } from '@jest/globals';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { eventually } from '../../../test/support/fixtures.ts';
import { isRedisUnavailable, REDIS_BACK_MESSAGE, REDIS_LOST_MESSAGE, RedisAvailability } from './availability.ts';

/** A logger whose lines are kept, at debug level. */
function recordingLogger() {
  const lines: { level: number; msg: string; durationMs?: number; mode?: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as (typeof lines)[number]);
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

describe('isRedisUnavailable', () => {
  it.each([
    [new Error('Connection is closed.'), true],
    [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }), true],
    [new Error("READONLY You can't write against a read only replica."), true],
    [new Error('CLUSTERDOWN The cluster is down'), true],
    [new Error('TRYAGAIN Multiple keys request during rehashing of slot'), true],
    [new Error('LOADING Redis is loading the dataset in memory'), true],
    [new Error('All sentinels are unreachable. Retrying from scratch after 50ms.'), true],
    [new Error('Too many Cluster redirections. Last error: Error: Connection is closed.'), true],
    [new Error('Command timed out'), true],
    [new Error('outer', { cause: new Error('Connection is closed.') }), true],
    [new Error('ERR unknown command'), false],
    [new Error('WRONGPASS invalid username-password pair'), false],
    [new Error('Missing lock for job 1. moveToFinished'), false],
    ['READONLY as a string', false],
  ])('%s → %s', (error, expected) => {
    expect(isRedisUnavailable(error)).toBe(expected);
  });
});

describe('RedisAvailability: an outage is two warnings', () => {
  function watch(options: { probeOk: () => boolean; connected?: () => boolean }) {
    const { logger, lines } = recordingLogger();
    const probes = { count: 0 };
    const availability = new RedisAvailability({
      logger,
      probe: async () => {
        probes.count += 1;
        if (!options.probeOk()) throw new Error('Connection is closed.');
      },
      allConnected: options.connected ?? (() => true),
      describe: () => ({ mode: 'sentinel', node: '127.0.0.1:6380' }),
      probeIntervalMs: 20,
    });
    const warnings = () => lines.filter((line) => line.level === 40).map((line) => line.msg);
    return { availability, lines, warnings, probes };
  }

  it('warns once when Redis goes, however many errors say so, and once when a probe finds it back', async () => {
    let up = false;
    const { availability, lines, warnings } = watch({ probeOk: () => up });
    for (let index = 0; index < 5; index += 1)
      availability.report(new Error('connect ECONNREFUSED 127.0.0.1:6380'), 'redis connection error');
    availability.report(new Error('Connection is closed.'), 'queue error');
    expect(availability.lost).toBe(true);
    expect(warnings()).toEqual([REDIS_LOST_MESSAGE]);
    // Every error is still there, at debug level.
    expect(lines.filter((line) => line.level === 20)).toHaveLength(6);
    up = true;
    await eventually(async () => (availability.lost ? undefined : true), 2_000, 10);
    expect(warnings()).toEqual([REDIS_LOST_MESSAGE, REDIS_BACK_MESSAGE]);
    const back = lines.find((line) => line.msg === REDIS_BACK_MESSAGE);
    expect(back).toMatchObject({ mode: 'sentinel', node: '127.0.0.1:6380' });
    expect(back?.durationMs).toBeGreaterThanOrEqual(0);
    availability.stop();
  });

  it('is not back while a connection is still away, even when the probe answers', async () => {
    let connected = false;
    const { availability, warnings, probes } = watch({ probeOk: () => true, connected: () => connected });
    availability.reportLost(new Error('Connection is closed.'));
    // Three probes have answered meanwhile.
    await eventually(async () => (probes.count >= 3 ? true : undefined), 2_000, 10);
    expect(availability.lost).toBe(true);
    expect(warnings()).toEqual([REDIS_LOST_MESSAGE]);
    connected = true;
    await eventually(async () => (availability.lost ? undefined : true), 2_000, 10);
    expect(warnings()).toEqual([REDIS_LOST_MESSAGE, REDIS_BACK_MESSAGE]);
    availability.stop();
  });

  it('is not back while connections still report Redis away between good probes (a Cluster settling after a failover)', async () => {
    const { availability, warnings, probes } = watch({ probeOk: () => true });
    availability.reportLost(new Error('CLUSTERDOWN The cluster is down'));
    // A connection still meets the old slot map after every probe that answered: the outage goes on.
    let seen = 0;
    await eventually(
      async () => {
        if (probes.count > seen) {
          seen = probes.count;
          availability.report(new Error('MOVED 3999 127.0.0.1:7001 Too many Cluster redirections?'), 'queue error');
        }
        return probes.count >= 6 ? true : undefined;
      },
      2_000,
      5,
    );
    expect(availability.lost).toBe(true);
    expect(warnings()).toEqual([REDIS_LOST_MESSAGE]);
    // Once they stop, the probes in a row call it back, once.
    await eventually(async () => (availability.lost ? undefined : true), 2_000, 10);
    expect(warnings()).toEqual([REDIS_LOST_MESSAGE, REDIS_BACK_MESSAGE]);
    availability.stop();
  });

  it('in the settling time after it is back, a report is another outage only when a probe confirms it', async () => {
    let up = false;
    const { availability, warnings, probes } = watch({ probeOk: () => up });
    availability.reportLost(new Error('Connection is closed.'));
    up = true;
    await eventually(async () => (availability.lost ? undefined : true), 2_000, 10);
    // BullMQ drops a blocking connection it gave up on: its commands fail while Redis serves.
    const before = probes.count;
    availability.report(new Error('Connection is closed.'), 'worker error');
    expect(probes.count).toBe(before + 1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(availability.lost).toBe(false);
    expect(warnings()).toEqual([REDIS_LOST_MESSAGE, REDIS_BACK_MESSAGE]);
    // Redis really goes again: the probe says so too.
    up = false;
    availability.report(new Error('Connection is closed.'), 'worker error');
    await eventually(async () => (availability.lost ? true : undefined), 2_000, 5);
    expect(warnings()).toEqual([REDIS_LOST_MESSAGE, REDIS_BACK_MESSAGE, REDIS_LOST_MESSAGE]);
    availability.stop();
  });

  it('while connections are dropped on purpose, a report is an outage only when a probe confirms it', async () => {
    let up = true;
    const { availability, warnings, probes } = watch({ probeOk: () => up });
    availability.expectResets();
    availability.report(new Error('Connection is closed.'), 'worker error');
    expect(probes.count).toBe(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect([availability.lost, warnings()]).toEqual([false, []]);
    up = false;
    availability.report(new Error('Connection is closed.'), 'worker error');
    await eventually(async () => (availability.lost ? true : undefined), 2_000, 5);
    expect(warnings()).toEqual([REDIS_LOST_MESSAGE]);
    availability.stop();
  });

  it('warns of an error that does not mean Redis is away, each time, without an outage', () => {
    const { availability, warnings } = watch({ probeOk: () => true });
    availability.report(new Error('WRONGPASS invalid username-password pair'), 'redis connection error');
    availability.report(new Error('WRONGPASS invalid username-password pair'), 'redis connection error');
    expect(availability.lost).toBe(false);
    expect(warnings()).toEqual(['redis connection error', 'redis connection error']);
  });

  it('says nothing more once stopped, and probes no more', () => {
    const { availability, warnings, probes } = watch({ probeOk: () => true });
    availability.stop();
    availability.reportLost(new Error('Connection is closed.'));
    expect(availability.lost).toBe(false);
    expect(warnings()).toEqual([]);
    expect(probes.count).toBe(0);
  });
});
