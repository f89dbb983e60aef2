import { describe, expect, it } from '@jest/globals';
import type { Logger } from '@runtasks/shared/logger';
import { RefusalLog } from './refusal-log.ts';

/** A logger that keeps its info lines. */
function keptLines(): { logger: Logger; lines: { fields: Record<string, unknown>; message: string }[] } {
  const lines: { fields: Record<string, unknown>; message: string }[] = [];
  const logger = { info: (fields: Record<string, unknown>, message: string) => void lines.push({ fields, message }) } as unknown as Logger;
  return { logger, lines };
}

describe('RefusalLog: refused requests logged as a sample', () => {
  it("writes an address's first refusal of an interval, then one summary of the rest by status", () => {
    const { logger, lines } = keptLines();
    const log = new RefusalLog({ logger, intervalMs: 60_000 });
    try {
      expect(log.record('192.0.2.1', 401)).toBe(true);
      const rest = [...Array.from({ length: 19 }, () => 401), ...Array.from({ length: 4_980 }, () => 429)];
      expect(rest.map((status) => log.record('192.0.2.1', status)).some(Boolean)).toBe(false);
      expect(log.record('192.0.2.2', 401)).toBe(true);
      log.flush();
      // The second address had only its first (already written): no summary for it.
      expect(lines).toEqual([
        { fields: { address: '192.0.2.1', refused: 4_999, statuses: { 401: 19, 429: 4_980 }, seconds: 60 }, message: 'requests refused' },
      ]);
      // A new interval: the first is written again.
      expect(log.record('192.0.2.1', 429)).toBe(true);
    } finally {
      log.stop();
    }
  });

  it('follows a bounded number of addresses and counts the others together', () => {
    const { logger, lines } = keptLines();
    const log = new RefusalLog({ logger, maxAddresses: 2 });
    try {
      expect(['a', 'b', 'c', 'd'].map((address) => log.record(address, 401))).toEqual([true, true, false, false]);
      log.flush();
      expect(lines).toEqual([{ fields: { refused: 2, seconds: 60 }, message: 'requests refused from addresses past the ones followed' }]);
    } finally {
      log.stop();
    }
  });
});
