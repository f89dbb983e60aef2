import { beforeAll, describe, expect, it } from '@jest/globals';
import { gzipSync } from 'node:zlib';
import { configurationArchive } from '../../../../test/support/archives.ts';
import { checkArchive, inflateHead } from './configuration-version.service.ts';

const MiB = 1024 * 1024;
const LIMIT = 50 * MiB; // CONFIGURATION_VERSION_MAX_BYTES's default

const notTar = { ok: false, status: 422, detail: 'The decompressed upload is not a tar archive.', errored: true };
const invalidGzip = { ok: false, status: 422, detail: 'The archive could not be decompressed: it is not valid gzip data.', errored: true };
const tooLarge = {
  ok: false,
  status: 422,
  detail: 'The archive could not be decompressed: it expands beyond the size limit.',
  errored: true,
};
const notGzip = { ok: false, status: 422, detail: 'The upload must be a gzip-compressed tar archive (.tar.gz).', errored: false };

describe('checkArchive', () => {
  const archive = configurationArchive('resource "null_resource" "x" {}\n');

  it.each<[string, () => Buffer, number, object]>([
    ['a real archive', () => archive, LIMIT, { ok: true }],
    ['an empty tar archive (zeros)', () => gzipSync(Buffer.alloc(10240)), LIMIT, { ok: true }],
    ['gzip of text', () => gzipSync(Buffer.from('not a tar archive at all')), LIMIT, notTar],
    ['gzip of less than one tar block', () => gzipSync(Buffer.alloc(511)), LIMIT, notTar],
    ['a real archive cut short (the header intact)', () => archive.subarray(0, archive.length - 8), LIMIT, invalidGzip],
    ['a real archive with its CRC changed', () => Buffer.concat([archive.subarray(0, -8), Buffer.alloc(8, 0xff)]), LIMIT, invalidGzip],
    ['gzip magic, then garbage', () => Buffer.from([0x1f, 0x8b, 1, 2, 3, 4]), LIMIT, invalidGzip],
    ['a real archive past 10× the limit once inflated', () => archive, 100, tooLarge],
    ['plain text', () => Buffer.from('plain text'), LIMIT, notGzip],
    ['nothing', () => Buffer.alloc(0), LIMIT, notGzip],
  ])('%s', async (_name, bytes, limit, expected) => {
    expect(await checkArchive(bytes(), limit)).toEqual(expected);
  });
});

// 64 MiB: the suite runs beside CPU-bound tests on two cores, and the bomb is deflated and inflated in full.
describe('a gzip bomb (64 MiB of zeros in ~64 KB)', () => {
  const BOMB = 64 * MiB;
  let bomb: Buffer;
  beforeAll(() => {
    bomb = gzipSync(Buffer.alloc(BOMB));
  });

  it('inflateHead keeps only the bytes asked for and stops just past the limit', async () => {
    const inflation = await inflateHead(bomb, 512, MiB);
    expect(inflation).toEqual({ ok: false, reason: 'too-large', inflatedBytes: expect.any(Number) });
    expect(inflation.inflatedBytes).toBeGreaterThan(MiB);
    expect(inflation.inflatedBytes).toBeLessThanOrEqual(MiB + 64 * 1024);

    const small = await inflateHead(gzipSync(Buffer.alloc(4 * MiB, 7)), 512, LIMIT * 10);
    expect(small).toEqual({ ok: true, head: Buffer.alloc(512, 7), inflatedBytes: 4 * MiB });
  });

  it('within 10× the limit it is judged like before (an empty archive), inflated in full while the event loop turns, 512 bytes kept', async () => {
    let turns = 0;
    let judging = true;
    const turn = (): void => {
      if (!judging) return;
      turns += 1;
      setImmediate(turn);
    };
    setImmediate(turn);
    // A limit whose 10× the bomb stays within.
    const check = await checkArchive(bomb, BOMB / 8);
    judging = false;
    expect(check).toEqual({ ok: true });
    // gunzipSync answered before the event loop turned once, holding all of it; the stream keeps the head
    // and counts the rest (process memory is no measure of that: garbage waits for the collector).
    expect(turns).toBeGreaterThan(0);
    expect(await inflateHead(bomb, 512, BOMB)).toEqual({ ok: true, head: Buffer.alloc(512), inflatedBytes: BOMB });
  });

  it('past 10× the limit it is refused as expanding too far', async () => {
    expect(await checkArchive(bomb, MiB)).toEqual(tooLarge);
  });
});
