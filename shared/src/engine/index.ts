// The run engine: every statement that changes a run, a task stage or a task result (docs/design.md, "The run engine").
export * from './advance-run.ts';
export * from './run-read.ts';
export * from './batch-writer.ts';
export * from './dispatch.ts';
export * from './executor.ts';
export * from './plan-run.ts';
export * from './sweeper.ts';
export * from './task-payload.ts';
export * from './advance-write.ts';
export * from './create-run.ts';
export * from './deadlines.ts';
export * from './run-actions.ts';
export * from './transitions.ts';
export * from './wake.ts';
export * from './callback.ts';
export * from './results.sql.ts';
export * from './runs.sql.ts';
