// The run engine: every statement that changes a run, a stage or a result.
export * from './workspace-queue.ts';
