// The run engine: every statement that changes a run, a task stage or a task result (docs/design.md, "The run engine").
export * from './advance-run.ts';
export * from './batch-writer.ts';
export * from './dispatch.ts';
export * from './executor.ts';
export * from './plan-run.ts';
export * from './sweeper.ts';
export * from './task-payload.ts';
