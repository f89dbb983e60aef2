import { describeOrchestrationOutside } from './outside.ts';

// The service pointed at a local Redis Cluster (REDIS_CLUSTER_NODES, QUEUE_PREFIX={runtasks}).
describeOrchestrationOutside('cluster');
