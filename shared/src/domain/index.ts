// The pure rules: no I/O, so any layer may import them.
export * from './editions.ts';
export * from './ids.ts';
export * from './statuses.ts';
export * from './planner.ts';
export * from './run-transitions.ts';
export * from './timestamps.ts';
export * from './outcome-limits.ts';
export * from './lifecycle.ts';
export * from './executions.ts';
export * from './plan-summary.ts';
export * from './feature-sets.ts';
export * from './embedding.ts';
export * from './run-options.ts';
export * from './organization-settings.ts';
export * from './team-access.ts';
export * from './run-queue.ts';
