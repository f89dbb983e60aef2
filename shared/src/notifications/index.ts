// Notifications (docs/notifications.md): payloads per destination type, and one attempt's sending.
export * from './payloads.ts';
export * from './send.ts';
export * from './deliveries.ts';
export * from './users.ts';
