import { createHook } from 'node:async_hooks';
import { eventually } from './fixtures.ts';

/**
 * ioredis quirk: disconnecting a client whose socket has already failed (Redis away, refused) arms a
 * 2 s timer to destroy that dead socket, and nothing clears it. A suite that does so tracks these
 * timers and, once its connections are closed, waits (polling, no fixed sleep) until they have run, so
 * Jest exits without open handles.
 */
export class SocketDestroyTimers {
  private readonly live = new Set<number>();
  private readonly hook = createHook({
    init: (asyncId, type) => {
      if (type === 'Timeout' && /ioredis[/\\]built[/\\]connectors[/\\]AbstractConnector\.js/.test(new Error().stack ?? '')) {
        this.live.add(asyncId);
        this.armed += 1;
      }
    },
    destroy: (asyncId) => {
      this.live.delete(asyncId);
    },
  });
  /** How many were armed since tracking began, run or not. */
  armed = 0;

  track(): void {
    this.hook.enable();
  }

  /** Waits until every tracked timer has run, then stops tracking. */
  async settle(): Promise<void> {
    await eventually(async () => (this.live.size === 0 ? true : undefined));
    this.hook.disable();
  }
}
