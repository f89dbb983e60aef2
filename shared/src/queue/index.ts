// Redis and BullMQ: queue and job names, retry backoff, connections (the one way to get one: RedisConnections).
export * from './names.ts';
export * from './backoff.ts';
export * from './hash-slot.ts';
export * from './connections.ts';
export * from './availability.ts';
export * from './redis.ts';
