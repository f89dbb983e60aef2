export * from './events.ts';
export * from './redact.ts';
