import { describe, expect, it } from '@jest/globals';
import { firstValue, joinedAsNeeded, PiecesAssembler } from './binary-copy.ts';

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

/** A binary COPY of rows `(total int4, offset int4, piece bytea)` cutting `value` in pieces of `size`, as one stream. */
function piecesCopy(value: Buffer, size: number, order: (offsets: number[]) => number[] = (offsets) => offsets): Buffer {
  const header = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(4), Buffer.alloc(4)]);
  const offsets: number[] = [];
  for (let at = 0; at < Math.max(value.length, 1); at += size) offsets.push(at);
  const rows = order(offsets).map((at) => {
    const piece = value.subarray(at, at + size);
    const row = Buffer.alloc(2 + 8 + 8 + 4 + piece.length);
    row.writeInt16BE(3, 0);
    row.writeInt32BE(4, 2);
    row.writeInt32BE(value.length, 6);
    row.writeInt32BE(4, 10);
    row.writeInt32BE(at, 14);
    row.writeInt32BE(piece.length, 18);
    piece.copy(row, 22);
    return row;
  });
  return Buffer.concat([header, ...rows, Buffer.from([0xff, 0xff])]);
}

/** Feeds `copy` to an assembler in messages cut at `cuts`, each a copy that is then overwritten (as pg's parser may). */
function assembled(copy: Buffer, cuts: number[]): Buffer | undefined {
  const assembler = new PiecesAssembler();
  let from = 0;
  for (const cut of [...cuts, copy.length]) {
    const message = Buffer.from(copy.subarray(from, cut));
    assembler.add(message);
    message.fill(0xaa);
    from = cut;
  }
  return assembler.value();
}

describe('assembling one value from the binary COPY of its pieces', () => {
  const value = Buffer.from(Array.from({ length: 1000 }, (_, index) => (index * 7) % 253));

  it('gives back the value byte for byte however the messages are cut', () => {
    const copy = piecesCopy(value, 96);
    for (const cuts of [
      [],
      [1],
      [11, 19],
      [19, 21, 25, 29, 33],
      [100, 101, 500],
      Array.from({ length: copy.length - 1 }, (_, index) => index + 1),
    ]) {
      expect(assembled(copy, cuts)).toEqual(value);
    }
  });

  it('places pieces by their offset, in whatever order they come', () => {
    expect(
      assembled(
        piecesCopy(value, 64, (offsets) => [...offsets].reverse()),
        [300],
      ),
    ).toEqual(value);
  });

  it('gives an empty value as empty, and no row as undefined', () => {
    expect(assembled(piecesCopy(Buffer.alloc(0), 64), [5])).toEqual(Buffer.alloc(0));
    const header = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8), Buffer.from([0xff, 0xff])]);
    expect(assembled(header, [3])).toBeUndefined();
  });

  it('refuses a COPY that ends early, pieces that leave a gap and bytes that are not a binary COPY', () => {
    const copy = piecesCopy(value, 100);
    const assembler = new PiecesAssembler();
    assembler.add(copy.subarray(0, 500));
    expect(() => assembler.value()).toThrow('ended early');
    const gap = piecesCopy(value, 100, (offsets) => offsets.filter((at) => at !== 300));
    expect(() => assembled(gap, [])).toThrow('do not cover');
    expect(() => assembled(Buffer.from('not a copy at all, no'), [])).toThrow('not a binary COPY');
  });
});
