// PostgreSQL: the ORM's configuration and entities, prepared statements, the outbox, LISTEN and startup.
export * from './sql.ts';
export * from './entities/index.ts';
export * from './orm-config.ts';
export * from './bootstrap.ts';
export * from './long-work.ts';
export * from './owners-team.ts';
export * from './unavailable.ts';
export * from './startup-errors.ts';
export * from './wait-for-services.ts';
export * from './principals-notify.ts';
export * from './outbox.ts';
export * from './prepared.ts';
export * from './listener.ts';
