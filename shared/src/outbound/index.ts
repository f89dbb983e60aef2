// The one HTTP client to task servers and what it needs: signing, payloads, limits, the destination guard.
export * from './destination-guard.ts';
export * from './signing.ts';
export * from './task-client.ts';
export * from './retry-after.ts';
export * from './payload.ts';
export * from './answer-excerpt.ts';
