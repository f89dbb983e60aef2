import type { Logger } from 'pino';

/**
 * SIGTERM/SIGINT → `stop()` once, then exit 0; a stop that outlives `timeoutMs` exits 1 instead, so a
 * hung dependency can never keep a deploy waiting.
 */
export function onShutdownSignals(logger: Logger, timeoutMs: number, stop: () => Promise<void>): void {
  let stopping = false;
  const handle = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const hardStop = setTimeout(() => {
      logger.error('shutdown took too long; exiting');
      process.exit(1);
    }, timeoutMs);
    hardStop.unref();
    stop().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => handle('SIGTERM'));
  process.on('SIGINT', () => handle('SIGINT'));
}
