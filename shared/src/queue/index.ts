// Redis and BullMQ: queue and job names, retry backoff, connections.
export * from './names.ts';
export * from './backoff.ts';
export * from './redis.ts';
