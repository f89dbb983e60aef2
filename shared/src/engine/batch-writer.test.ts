import { describe, expect, it } from '@jest/globals';
import { BatchWriter } from './batch-writer.ts';

/** A write that waits until the test lets it finish, recording each batch it was given. */
function gatedWrites(): { batches: number[][]; finish: (error?: Error) => void; write: (items: number[]) => Promise<void> } {
  const batches: number[][] = [];
  const pending: ((error?: Error) => void)[] = [];
  return {
    batches,
    finish: (error) => pending.shift()?.(error),
    write: (items) => {
      batches.push(items);
      return new Promise((resolve, reject) => pending.push((error) => (error ? reject(error) : resolve())));
    },
  };
}

const settled = <T>(promise: Promise<T>): Promise<string> =>
  promise.then(
    () => 'written',
    (error: Error) => `failed: ${error.message}`,
  );

/** Lets every pending promise callback run. */
const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('BatchWriter', () => {
  it('writes an item alone at once when idle, and those that arrive meanwhile together in the next batch', async () => {
    const gate = gatedWrites();
    const writer = new BatchWriter(gate.write, 10);
    const first = settled(writer.write(1));
    expect(gate.batches).toEqual([[1]]);
    const later = [2, 3, 4].map((item) => settled(writer.write(item)));
    await flush();
    // Nothing more is written until the first batch is.
    expect(gate.batches).toEqual([[1]]);
    gate.finish();
    expect(await first).toBe('written');
    await flush();
    expect(gate.batches).toEqual([[1], [2, 3, 4]]);
    gate.finish();
    expect(await Promise.all(later)).toEqual(['written', 'written', 'written']);
    // Idle again: the next item goes alone, at once.
    const last = settled(writer.write(5));
    expect(gate.batches).toEqual([[1], [2, 3, 4], [5]]);
    gate.finish();
    expect(await last).toBe('written');
  });

  it('writes at most maxBatch items at a time', async () => {
    const gate = gatedWrites();
    const writer = new BatchWriter(gate.write, 2);
    const all = [1, 2, 3, 4, 5, 6].map((item) => settled(writer.write(item)));
    for (let batch = 0; batch < 4; batch += 1) {
      await flush();
      gate.finish();
    }
    expect(await Promise.all(all)).toEqual(Array(6).fill('written'));
    expect(gate.batches).toEqual([[1], [2, 3], [4, 5], [6]]);
  });

  it('fails the callers of a failed batch with its error, and goes on with the next batch', async () => {
    const gate = gatedWrites();
    const writer = new BatchWriter(gate.write, 10);
    const first = settled(writer.write(1));
    const failing = [2, 3].map((item) => settled(writer.write(item)));
    gate.finish();
    await flush();
    gate.finish(new Error('redis is away'));
    expect(await first).toBe('written');
    expect(await Promise.all(failing)).toEqual(['failed: redis is away', 'failed: redis is away']);
    const after = settled(writer.write(4));
    await flush();
    expect(gate.batches).toEqual([[1], [2, 3], [4]]);
    gate.finish();
    expect(await after).toBe('written');
  });

  it("writes a batch that failed for one item's sake again one by one: only that item's caller fails", async () => {
    const batches: number[][] = [];
    const bad = Object.assign(new Error('item 3 refused'), { code: '22021' });
    // Refuses every batch holding 3, as PostgreSQL refuses a whole statement for one row.
    const write = (items: number[]): Promise<void> => {
      batches.push(items);
      return items.includes(3) ? Promise.reject(bad) : Promise.resolve();
    };
    const writer = new BatchWriter(write, 10, (error) => error === bad);
    const first = settled(writer.write(1));
    const queued = [2, 3, 4].map((item) => settled(writer.write(item)));
    expect(await first).toBe('written');
    expect(await Promise.all(queued)).toEqual(['written', 'failed: item 3 refused', 'written']);
    expect(batches).toEqual([[1], [2, 3, 4], [2], [3], [4]]);
  });

  it('does not split a batch whose error is not an item’s own (the whole batch fails, once)', async () => {
    const batches: number[][] = [];
    const write = (items: number[]): Promise<void> => {
      batches.push(items);
      return items.length > 1 ? Promise.reject(new Error('connection lost')) : Promise.resolve();
    };
    const writer = new BatchWriter(write, 10, () => false);
    const first = settled(writer.write(1));
    const queued = [2, 3].map((item) => settled(writer.write(item)));
    expect(await first).toBe('written');
    expect(await Promise.all(queued)).toEqual(['failed: connection lost', 'failed: connection lost']);
    expect(batches).toEqual([[1], [2, 3]]);
  });
});
