import { describe, expect, it } from '@jest/globals';
import { firstValue, joinedAsNeeded } from './binary-copy.ts';

/** A binary COPY of one bytea row holding `value` (or no row), as PostgreSQL frames it. */
function binaryCopy(value: Buffer | undefined): { header: Buffer; row: Buffer; trailer: Buffer } {
  const header = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(4), Buffer.alloc(4)]);
  const row = value ? Buffer.concat([Buffer.from([0, 1]), Buffer.from([0, 0, 0, 0]), value]) : Buffer.alloc(0);
  if (value) row.writeInt32BE(value.length, 2);
  return { header, row, trailer: Buffer.from([0xff, 0xff]) };
}

describe('reading one value out of a binary COPY', () => {
  const value = Buffer.from(Array.from({ length: 1000 }, (_, index) => index % 251));

  it('keeps the first message as it is when it holds the header and the whole row (no second copy)', () => {
    const { header, row, trailer } = binaryCopy(value);
    const first = Buffer.concat([header, row]);
    const joined = joinedAsNeeded([first, trailer]);
    expect(joined).toBe(first);
    expect(firstValue(joined)).toEqual(value);
  });

  it('joins the messages when the row is split across them', () => {
    const { header, row, trailer } = binaryCopy(value);
    const whole = Buffer.concat([header, row, trailer]);
    for (const cut of [5, 19, 21, 25, 400, whole.length - 3]) {
      const joined = joinedAsNeeded([whole.subarray(0, cut), whole.subarray(cut)]);
      expect(firstValue(joined)).toEqual(value);
    }
  });

  it('finds no value in a COPY without a row, split or not', () => {
    const { header, trailer } = binaryCopy(undefined);
    expect(firstValue(joinedAsNeeded([header, trailer]))).toBeUndefined();
    expect(firstValue(joinedAsNeeded([Buffer.concat([header, trailer])]))).toBeUndefined();
  });
});
