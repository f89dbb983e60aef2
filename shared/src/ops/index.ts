// Operations: metrics, readiness, the health server, shutdown.
export * from './metrics.ts';
export * from './readiness.ts';
export * from './health-server.ts';
export * from './shutdown.ts';
