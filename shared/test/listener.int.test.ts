import { describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:net';
import { pino } from 'pino';
import { ChannelListener } from '../src/db/listener.ts';
import { eventually } from '../../test/support/fixtures.ts';

/**
 * A listener that cannot reach PostgreSQL says so in one line that does not change from one attempt
 * to the next (what the owner falls back on), with when it tries again as a field, doubling.
 */
describe('ChannelListener when PostgreSQL is away', () => {
  it('logs each failed attempt with the delay of the next, doubling', async () => {
    // A port nobody listens on (taken, then let go): every attempt is refused at once.
    const probe: Server = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise((resolve) => probe.close(resolve));
    const entries: { msg: string; retryInMs?: number }[] = [];
    const logger = pino(
      { level: 'warn' },
      { write: (line: string) => void entries.push(JSON.parse(line) as { msg: string; retryInMs?: number }) },
    );
    let lost = 0;
    const listener = new ChannelListener({
      databaseUrl: `postgres://postgres@127.0.0.1:${port}/none`,
      channel: 'listener_probe',
      logger,
      name: 'probe listener',
      fallback: 'the probe goes on',
      onNotification: () => undefined,
      onLost: () => (lost += 1),
    });
    try {
      await listener.start();
      // The first retry comes after 0.5 s, the second after a further second.
      await eventually(async () => (entries.length >= 2 ? true : undefined), 5_000);
      expect(entries.slice(0, 2)).toEqual([
        expect.objectContaining({ msg: 'probe listener unavailable; the probe goes on', retryInMs: 500 }),
        expect.objectContaining({ msg: 'probe listener unavailable; the probe goes on', retryInMs: 1_000 }),
      ]);
      expect(listener.listening).toBe(false);
      expect(lost).toBeGreaterThanOrEqual(2);
    } finally {
      await listener.stop();
    }
  });
});
