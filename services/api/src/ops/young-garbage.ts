import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * The garbage of large bodies collected young: after every COLLECT_EVERY_BYTES the API's downloads
 * served and its uploads received (all of them together), a minor garbage collection (a scavenge) is
 * asked for.
 *
 * Why: each byte served leaves buffers behind outside V8's heap (the socket's reads from PostgreSQL,
 * pg's parser, the chunk handed to the response: some 2.6 bytes a byte), and each byte received too
 * (the socket's reads, the 256 KiB parts, pg's copy of each into its statement, the gzip check's output). V8 counts them, but only
 * starts collecting when they have grown by 64 MiB since its last full collection, and a download does
 * not allocate enough on the heap itself to fill the young generation first; so at 140 MiB/s the
 * garbage ran past the 64 MiB before the collection ended, and the API's RSS rose by 130 MiB beside
 * 16 download lanes (bench/NOTES.md, 2026-11-28). These buffers die young, and a scavenge frees them
 * in milliseconds: one every 16 MiB bounds what waits to some 45 MB.
 *
 * The collector is V8's `gc` extension, enabled for a fresh context only (the process needs no
 * --expose-gc flag, and no other context gets it); where it cannot be had, nothing is asked for.
 */
export const COLLECT_EVERY_BYTES = 16 * 1024 * 1024;

type Collect = (options: { type: 'minor'; execution: 'async' }) => unknown;

/** undefined: not looked up yet; null: not available. */
let collect: Collect | null | undefined;

function collector(): Collect | null {
  if (collect !== undefined) return collect;
  collect = null;
  const exposed = (globalThis as { gc?: Collect }).gc;
  if (typeof exposed === 'function') return (collect = exposed);
  try {
    setFlagsFromString('--expose-gc');
    const found: unknown = runInNewContext('gc');
    if (typeof found === 'function') collect = found as Collect;
  } catch {
    // No collector: V8's own schedule stays, and so does the memory it lets wait.
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
  return collect;
}

let served = 0;
let asked = 0;

/** Counts `bytes` a download served or an upload received; asks for a scavenge once COLLECT_EVERY_BYTES have passed since the last. */
export function noteStreamed(bytes: number): void {
  served += bytes;
  if (served < COLLECT_EVERY_BYTES) return;
  served = 0;
  const scavenge = collector();
  if (!scavenge) return;
  asked += 1;
  // Async: V8 runs it as a task of its own, not inside this chunk's write.
  void scavenge({ type: 'minor', execution: 'async' });
}

/** The scavenges asked for so far in this process (for tests). */
export function scavengesAsked(): number {
  return asked;
}
