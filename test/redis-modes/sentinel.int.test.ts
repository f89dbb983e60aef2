import { describeOrchestrationOutside } from './outside.ts';

// The service pointed at a local Sentinel set (REDIS_SENTINELS, REDIS_SENTINEL_NAME=mymaster).
describeOrchestrationOutside('sentinel');
