export { startWorker, type RunningWorker, type WorkerDeps } from './worker.ts';
export { OutboxRelay } from './outbox-relay.ts';
