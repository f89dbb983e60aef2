import { Readable } from 'node:stream';
import type { Config } from '@runtasks/shared/config';
import type { Next } from 'koa';
import type { ApiContext } from '../context.ts';
import { noteStreamed } from './young-garbage.ts';

/**
 * Downloads give way to the other requests of their API process (docs/limits-and-security.md,
 * "Concurrent downloads"): between two chunks, a download waits while any other request is being
 * handled, for up to DOWNLOADS_YIELD_MS (once per 256 KiB).
 *
 * Why: on a machine short of CPU the API process gets only its share of a core, and every chunk a
 * download reads and sends is work on the one event loop. A list request is some ten sequential
 * hops (Redis for the rate limit, then its statements), and each hop waits behind every chunk that
 * became ready meanwhile: beside five streaming downloads the event loop lagged 25 ms at the median
 * and 225 ms at p99, and a list took over a second (bench/NOTES.md, 2026-11-28). Downloads are bulk
 * transfers a client waits seconds for anyway; a short pause per chunk is invisible to them and
 * leaves the loop to the requests a person or a pipeline is waiting on. The pause is bounded, so a
 * download always progresses, and nothing is held while it waits (one chunk at most, the stream's).
 */

/**
 * A download gives way once per this many bytes, whatever the size of its store's chunks (PostgreSQL's
 * rows are 256 KiB, an S3 body arrives in pieces of some 16 to 64 KiB).
 */
const YIELD_EVERY_BYTES = 256 * 1024;

/** Requests whose body is larger than this are uploads: they are not waited for. */
const UPLOAD_BYTES = 1024 * 1024;

interface Gate {
  /** Requests being handled that downloads give way to. */
  handling: number;
  /** Downloads waiting for `handling` to fall to 0. */
  waiting: Set<() => void>;
}

/** Per API (tests start several in one process), found by its configuration. */
const gates = new WeakMap<Config, Gate>();
/** How a counted request stops counting (once), by its response. */
const leaving = new WeakMap<object, () => void>();

function gateOf(config: Config): Gate {
  let gate = gates.get(config);
  if (!gate) gates.set(config, (gate = { handling: 0, waiting: new Set() }));
  return gate;
}

/** Whether a request's body makes it an upload (long, paced by its client): not counted. */
function isUpload(ctx: ApiContext): boolean {
  const length = Number(ctx.get('content-length') || 0);
  return length > UPLOAD_BYTES || (ctx.get('transfer-encoding') !== '' && length === 0);
}

/** Counts the request while it is handled (until its body is set), so that downloads give way to it. */
export function countHandling() {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    if (ctx.deps.config.downloadsYieldMs <= 0 || isUpload(ctx)) return next();
    const gate = gateOf(ctx.deps.config);
    gate.handling += 1;
    let counted = true;
    const leave = (): void => {
      if (!counted) return;
      counted = false;
      gate.handling -= 1;
      if (gate.handling === 0) for (const wake of gate.waiting) wake();
    };
    leaving.set(ctx.res, leave);
    try {
      await next();
    } finally {
      leave();
    }
  };
}

/** A download is not waited for by the others: it stops counting as soon as it is known to be one. */
export function stopCounting(ctx: ApiContext): void {
  leaving.get(ctx.res)?.();
}

/** Resolves once no request is being handled, or after `ms`. */
function turn(gate: Gate, ms: number): Promise<void> {
  if (gate.handling === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const wake = (): void => {
      clearTimeout(timer);
      gate.waiting.delete(wake);
      resolve();
    };
    const timer = setTimeout(wake, ms);
    gate.waiting.add(wake);
  });
}

/**
 * `body` again, each 256 KiB after the first sent once the other requests were handled (or
 * DOWNLOADS_YIELD_MS passed; not waited for with 0), and every chunk counted for the scavenges of
 * young-garbage.ts.
 */
export function yieldingBody(config: Config, body: Readable): Readable {
  const gate = gateOf(config);
  async function* chunks(): AsyncGenerator<Buffer> {
    let sent = 0;
    // The source reads one chunk ahead at most (its highWaterMark): while this waits, it reads nothing more.
    for await (const chunk of body) {
      if (sent >= YIELD_EVERY_BYTES && config.downloadsYieldMs > 0) {
        await turn(gate, config.downloadsYieldMs);
        sent = 0;
      }
      const bytes = chunk as Buffer;
      sent += bytes.length;
      noteStreamed(bytes.length);
      yield bytes;
    }
  }
  return Readable.from(chunks(), { objectMode: false, highWaterMark: 1 });
}
