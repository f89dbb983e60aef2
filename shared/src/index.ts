// Deprecated: import a layer instead (`@runtasks/shared/domain`, `/db`, `/queue`, `/config`, `/errors`,
// `/logger`, `/outbound`, `/security`, `/ops`, `/embedded`), so an import says what its file needs.
// This root stays only for files not yet converted; eslint.config.js forbids it everywhere else.
export * from './config.ts';
export * from './errors.ts';
export * from './logger.ts';
export * from './domain/index.ts';
export * from './db/index.ts';
export * from './queue/index.ts';
export * from './outbound/index.ts';
export * from './security/index.ts';
export * from './ops/index.ts';
export * from './embedded/index.ts';
export * from './engine/index.ts';
