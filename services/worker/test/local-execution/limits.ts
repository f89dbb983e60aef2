import { type RunStage } from '@runtasks/shared/domain';

/** The plan size limit of the API under test, and the stages in order. */

export const PLAN_JSON_MAX_BYTES = 64 * 1024;
export const ALL_STAGES: RunStage[] = ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'];
