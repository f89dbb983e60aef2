import { describe, expect, it } from '@jest/globals';
import { runInNewContext } from 'node:vm';
import { COLLECT_EVERY_BYTES, noteStreamed, scavengesAsked } from './young-garbage.ts';

describe('scavenges after bytes served', () => {
  it('asks for one each time COLLECT_EVERY_BYTES have been served, however they are cut', () => {
    const before = scavengesAsked();
    noteStreamed(COLLECT_EVERY_BYTES - 1);
    expect(scavengesAsked()).toBe(before);
    noteStreamed(1);
    expect(scavengesAsked()).toBe(before + 1);
    for (let chunk = 0; chunk < 64; chunk += 1) noteStreamed(COLLECT_EVERY_BYTES / 32);
    expect(scavengesAsked()).toBe(before + 3);
  });

  it('leaves no gc function to the process or to later contexts', () => {
    noteStreamed(COLLECT_EVERY_BYTES);
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
    expect(runInNewContext('typeof gc')).toBe('undefined');
  });
});
