import { describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from './config.ts';

/** Expects loadConfig to throw a ConfigError whose message names `variable`. */
function expectInvalid(env: Record<string, string>, variable: string): void {
  let error: unknown;
  try {
    loadConfig(env);
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as Error).message).toContain(variable);
}

describe('loadConfig defaults', () => {
  const config = loadConfig({});

  it.each([
    ['nodeEnv', 'development'],
    ['databaseUrl', 'postgres://postgres@127.0.0.1:5432/runtasks'],
    ['databasePoolSize', 10],
    ['databaseStatementTimeoutMs', 30000],
    ['redisUrl', 'redis://127.0.0.1:6379/0'],
    ['host', '127.0.0.1'],
    ['port', 3000],
    ['reusePort', false],
    ['publicBaseUrl', 'http://localhost:3000'],
    ['adminToken', undefined],
    ['secretKey', undefined],
    ['taskDestinationAllowlist', []],
    ['taskProgressTimeoutSeconds', 600],
    ['taskMaxRuntimeSeconds', 3600],
    ['queuePrefix', 'runtasks'],
    ['logLevel', 'info'],
    ['workerConcurrency', 16],
    ['outboxPollIntervalMs', 2000],
    ['taskVerificationTimeoutSeconds', 10],
    ['taskRetryDelaysMs', [5000, 30000, 120000]],
    ['sweeperIntervalMs', 15000],
    ['configurationVersionMaxBytes', 52428800],
    ['configurationUploadUrlTtlSeconds', 3600],
    ['rateLimitPerSecond', 30],
    ['authCacheTtlMs', 10000],
    ['dashboardReadOnly', true],
    ['pagesSessionTtlSeconds', 28800],
    ['pagesRefreshMs', 5000],
    ['workerHealthPort', 9100],
    ['shutdownDrainDelayMs', 1000],
    ['shutdownTimeoutMs', 25000],
    ['embedded', { mode: 'auto', databaseUrlSet: false, redisUrlSet: false }],
    ['dataDir', '.runtasks'],
    ['startupTimeoutMs', 60000],
    ['authFailuresPerMinute', 20],
    ['trustProxy', false],
    ['planJsonMaxBytes', 52428800],
    ['localExecutionTimeoutSeconds', 3600],
  ] as const)('%s defaults to %j', (key, expected) => {
    expect(config[key]).toEqual(expected);
  });

  it('has no other keys', () => {
    expect(Object.keys(config).sort()).toEqual(
      [
        'adminToken',
        'databasePoolSize',
        'databaseStatementTimeoutMs',
        'databaseUrl',
        'host',
        'logLevel',
        'nodeEnv',
        'outboxPollIntervalMs',
        'port',
        'publicBaseUrl',
        'queuePrefix',
        'redisUrl',
        'reusePort',
        'secretKey',
        'taskDestinationAllowlist',
        'taskMaxRuntimeSeconds',
        'taskProgressTimeoutSeconds',
        'workerConcurrency',
        'taskVerificationTimeoutSeconds',
        'taskRetryDelaysMs',
        'sweeperIntervalMs',
        'configurationVersionMaxBytes',
        'configurationUploadUrlTtlSeconds',
        'rateLimitPerSecond',
        'authCacheTtlMs',
        'dashboardReadOnly',
        'pagesSessionTtlSeconds',
        'pagesRefreshMs',
        'workerHealthPort',
        'shutdownDrainDelayMs',
        'shutdownTimeoutMs',
        'embedded',
        'dataDir',
        'startupTimeoutMs',
        'authFailuresPerMinute',
        'trustProxy',
        'planJsonMaxBytes',
        'localExecutionTimeoutSeconds',
      ].sort(),
    );
  });

  it('PUBLIC_BASE_URL defaults to http://localhost:$PORT', () => {
    expect(loadConfig({ PORT: '8080' }).publicBaseUrl).toBe('http://localhost:8080');
  });

  it('reads nothing but the env it is given', () => {
    expect(loadConfig({ QUEUE_PREFIX: 'mine' }).databaseUrl).toBe('postgres://postgres@127.0.0.1:5432/runtasks');
  });
});

describe('loadConfig values', () => {
  it.each([
    [{ NODE_ENV: 'production' }, 'nodeEnv', 'production'],
    [{ NODE_ENV: 'test' }, 'nodeEnv', 'test'],
    [{ DATABASE_URL: 'postgresql://u:p@db.internal:5433/rt' }, 'databaseUrl', 'postgresql://u:p@db.internal:5433/rt'],
    [{ DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/other' }, 'databaseUrl', 'postgres://postgres@127.0.0.1:5432/other'],
    [{ DATABASE_POOL_SIZE: '40' }, 'databasePoolSize', 40],
    [{ DATABASE_POOL_SIZE: '1' }, 'databasePoolSize', 1],
    [{ DATABASE_STATEMENT_TIMEOUT_MS: '0' }, 'databaseStatementTimeoutMs', 0],
    [{ DATABASE_STATEMENT_TIMEOUT_MS: '1500' }, 'databaseStatementTimeoutMs', 1500],
    [{ REDIS_URL: 'rediss://cache.internal:6380/2' }, 'redisUrl', 'rediss://cache.internal:6380/2'],
    [{ HOST: '0.0.0.0' }, 'host', '0.0.0.0'],
    [{ PORT: '0' }, 'port', 0],
    [{ PORT: '65535' }, 'port', 65535],
    [{ REUSE_PORT: 'true' }, 'reusePort', true],
    [{ REUSE_PORT: 'false' }, 'reusePort', false],
    [{ PUBLIC_BASE_URL: 'https://runtasks.example.com' }, 'publicBaseUrl', 'https://runtasks.example.com'],
    [{ PUBLIC_BASE_URL: 'https://runtasks.example.com/' }, 'publicBaseUrl', 'https://runtasks.example.com'],
    [{ PUBLIC_BASE_URL: 'https://example.com/runtasks//' }, 'publicBaseUrl', 'https://example.com/runtasks'],
    [{ PUBLIC_BASE_URL: 'https://x.test', PORT: '9' }, 'publicBaseUrl', 'https://x.test'],
    [{ ADMIN_TOKEN: 'a'.repeat(20) }, 'adminToken', 'a'.repeat(20)],
    [{ ADMIN_TOKEN: 'Ab0_-'.repeat(4) }, 'adminToken', 'Ab0_-'.repeat(4)],
    [{ ADMIN_TOKEN: 'z'.repeat(256) }, 'adminToken', 'z'.repeat(256)],
    [{ SECRET_KEY: 's'.repeat(32) }, 'secretKey', 's'.repeat(32)],
    [{ TASK_PROGRESS_TIMEOUT_SECONDS: '30' }, 'taskProgressTimeoutSeconds', 30],
    [{ TASK_MAX_RUNTIME_SECONDS: '7200' }, 'taskMaxRuntimeSeconds', 7200],
    [{ QUEUE_PREFIX: 'rt-staging' }, 'queuePrefix', 'rt-staging'],
    [{ LOG_LEVEL: 'silent' }, 'logLevel', 'silent'],
    [{ WORKER_CONCURRENCY: '4' }, 'workerConcurrency', 4],
    [{ OUTBOX_POLL_INTERVAL_MS: '250' }, 'outboxPollIntervalMs', 250],
    [{ AUTH_CACHE_TTL_SECONDS: '0' }, 'authCacheTtlMs', 0],
    [{ AUTH_CACHE_TTL_SECONDS: '2.5' }, 'authCacheTtlMs', 2500],
    [{ AUTH_CACHE_TTL_SECONDS: '3600' }, 'authCacheTtlMs', 3_600_000],
    [{ RUNTASKS_EMBEDDED: 'always' }, 'embedded', { mode: 'always', databaseUrlSet: false, redisUrlSet: false }],
    [{ RUNTASKS_EMBEDDED: 'never' }, 'embedded', { mode: 'never', databaseUrlSet: false, redisUrlSet: false }],
    [{ NODE_ENV: 'production' }, 'embedded', { mode: 'never', databaseUrlSet: false, redisUrlSet: false }],
    [{ NODE_ENV: 'production', RUNTASKS_EMBEDDED: 'auto' }, 'embedded', { mode: 'never', databaseUrlSet: false, redisUrlSet: false }],
    [
      { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/runtasks' },
      'embedded',
      { mode: 'auto', databaseUrlSet: true, redisUrlSet: false },
    ],
    [{ REDIS_URL: 'redis://127.0.0.1:6379/0' }, 'embedded', { mode: 'auto', databaseUrlSet: false, redisUrlSet: true }],
    [{ RUNTASKS_DATA_DIR: '/var/tmp/rt' }, 'dataDir', '/var/tmp/rt'],
    [{ STARTUP_TIMEOUT_SECONDS: '0' }, 'startupTimeoutMs', 0],
    [{ AUTH_FAILURES_PER_MINUTE: '0' }, 'authFailuresPerMinute', 0],
    [{ AUTH_FAILURES_PER_MINUTE: '100' }, 'authFailuresPerMinute', 100],
    [{ TRUST_PROXY: 'true' }, 'trustProxy', true],
    [{ STARTUP_TIMEOUT_SECONDS: '2.5' }, 'startupTimeoutMs', 2500],
    [{ PAGES_SESSION_TTL_SECONDS: '3600' }, 'pagesSessionTtlSeconds', 3600],
    [{ PAGES_REFRESH_SECONDS: '1.5' }, 'pagesRefreshMs', 1500],
  ] as const)('%j → %s = %j', (env, key, expected) => {
    expect(loadConfig(env)[key]).toEqual(expected);
  });

  it.each([
    ['', []],
    [' ', []],
    [',,', []],
    ['hooks.example.com', ['hooks.example.com']],
    ['a.example.com,10.0.0.0/8', ['a.example.com', '10.0.0.0/8']],
    [' a.example.com , b.example.com ,', ['a.example.com', 'b.example.com']],
    ['a.example.com,,*.b.example.com', ['a.example.com', '*.b.example.com']],
  ])('TASK_DESTINATION_ALLOWLIST %j → %j', (raw, expected) => {
    expect(loadConfig({ TASK_DESTINATION_ALLOWLIST: raw }).taskDestinationAllowlist).toEqual(expected);
  });
});

describe('loadConfig: empty strings count as unset', () => {
  it.each([
    ['NODE_ENV', 'nodeEnv', 'development'],
    ['DATABASE_URL', 'databaseUrl', 'postgres://postgres@127.0.0.1:5432/runtasks'],
    ['DATABASE_POOL_SIZE', 'databasePoolSize', 10],
    ['DATABASE_STATEMENT_TIMEOUT_MS', 'databaseStatementTimeoutMs', 30_000],
    ['REDIS_URL', 'redisUrl', 'redis://127.0.0.1:6379/0'],
    ['HOST', 'host', '127.0.0.1'],
    ['PORT', 'port', 3000],
    ['PUBLIC_BASE_URL', 'publicBaseUrl', 'http://localhost:3000'],
    ['ADMIN_TOKEN', 'adminToken', undefined],
    ['SECRET_KEY', 'secretKey', undefined],
    ['TASK_DESTINATION_ALLOWLIST', 'taskDestinationAllowlist', []],
    ['TASK_PROGRESS_TIMEOUT_SECONDS', 'taskProgressTimeoutSeconds', 600],
    ['TASK_MAX_RUNTIME_SECONDS', 'taskMaxRuntimeSeconds', 3600],
    ['QUEUE_PREFIX', 'queuePrefix', 'runtasks'],
    ['LOG_LEVEL', 'logLevel', 'info'],
    ['WORKER_CONCURRENCY', 'workerConcurrency', 16],
    ['OUTBOX_POLL_INTERVAL_MS', 'outboxPollIntervalMs', 2000],
    ['RUNTASKS_DATA_DIR', 'dataDir', '.runtasks'],
  ] as const)('%s="" gives the default', (variable, key, expected) => {
    expect(loadConfig({ [variable]: '' })[key]).toEqual(expected);
  });

  it('undefined values are unset too', () => {
    expect(loadConfig({ PORT: undefined, QUEUE_PREFIX: undefined })).toEqual(loadConfig({}));
  });
});

describe('loadConfig: invalid values throw a ConfigError naming the variable', () => {
  it.each([
    ['NODE_ENV', 'staging'],
    ['DATABASE_URL', 'not a url'],
    ['DATABASE_URL', 'mysql://root@127.0.0.1/runtasks'],
    ['DATABASE_URL', 'redis://127.0.0.1:6379/0'],
    ['DATABASE_POOL_SIZE', '0'],
    ['DATABASE_POOL_SIZE', '2.5'],
    ['DATABASE_POOL_SIZE', 'many'],
    ['DATABASE_STATEMENT_TIMEOUT_MS', '-1'],
    ['DATABASE_STATEMENT_TIMEOUT_MS', '2.5'],
    ['DATABASE_STATEMENT_TIMEOUT_MS', 'forever'],
    ['REDIS_URL', 'http://127.0.0.1:6379'],
    ['REDIS_URL', 'postgres://postgres@127.0.0.1:5432/runtasks'],
    ['RUNTASKS_EMBEDDED', 'yes'],
    ['PORT', 'abc'],
    ['PORT', '-1'],
    ['PORT', '65536'],
    ['PORT', '80.5'],
    ['REUSE_PORT', 'sometimes'],
    ['PUBLIC_BASE_URL', 'ftp://files.example.com'],
    ['PUBLIC_BASE_URL', 'localhost:3000'],
    ['ADMIN_TOKEN', 'too-short'],
    ['ADMIN_TOKEN', 'a'.repeat(19)],
    ['ADMIN_TOKEN', 'a'.repeat(257)],
    ['ADMIN_TOKEN', 'has spaces in the admin token'],
    ['ADMIN_TOKEN', 'a'.repeat(20) + '='],
    ['ADMIN_TOKEN', 'a'.repeat(20) + '.b'],
    ['SECRET_KEY', 's'.repeat(31)],
    ['TASK_PROGRESS_TIMEOUT_SECONDS', '0'],
    ['TASK_PROGRESS_TIMEOUT_SECONDS', '-5'],
    ['TASK_PROGRESS_TIMEOUT_SECONDS', 'ten'],
    ['TASK_PROGRESS_TIMEOUT_SECONDS', '1.5'],
    ['TASK_MAX_RUNTIME_SECONDS', '0'],
    ['TASK_MAX_RUNTIME_SECONDS', 'forever'],
    ['LOG_LEVEL', 'verbose'],
    ['WORKER_CONCURRENCY', '0'],
    ['OUTBOX_POLL_INTERVAL_MS', 'fast'],
    ['AUTH_CACHE_TTL_SECONDS', '-1'],
    ['AUTH_CACHE_TTL_SECONDS', '3601'],
    ['AUTH_CACHE_TTL_SECONDS', 'a while'],
    ['STARTUP_TIMEOUT_SECONDS', '-1'],
    ['STARTUP_TIMEOUT_SECONDS', 'soon'],
    ['AUTH_FAILURES_PER_MINUTE', '-1'],
    ['AUTH_FAILURES_PER_MINUTE', '2.5'],
    ['TRUST_PROXY', 'maybe'],
    ['PAGES_SESSION_TTL_SECONDS', '59'],
    ['PAGES_SESSION_TTL_SECONDS', '1.5'],
    ['PAGES_REFRESH_SECONDS', '0.5'],
    ['PAGES_REFRESH_SECONDS', 'often'],
  ])('%s=%j', (variable, value) => {
    expectInvalid({ [variable]: value }, variable);
  });

  it('names every invalid variable at once', () => {
    let error: unknown;
    try {
      loadConfig({ PORT: 'x', LOG_LEVEL: 'loud' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain('PORT');
    expect((error as Error).message).toContain('LOG_LEVEL');
  });

  it('refuses RUNTASKS_EMBEDDED=always with NODE_ENV=production, which names its services', () => {
    expectInvalid({ NODE_ENV: 'production', RUNTASKS_EMBEDDED: 'always' }, 'RUNTASKS_EMBEDDED');
  });

  it('ConfigError is an Error', () => {
    expect(new ConfigError('x')).toBeInstanceOf(Error);
  });
});
