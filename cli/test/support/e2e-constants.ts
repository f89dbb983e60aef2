import { type TaskSpec } from './cli-harness.ts';

/** Limits, the golden summary and the stages of the CLI end-to-end tests. */

export const PLAN_JSON_MAX_BYTES = 64 * 1024;
export const E2E_GOLDEN = new URL('../fixtures/e2e-summary.golden.md', import.meta.url);
export const ALL: TaskSpec['stages'] = ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'];
