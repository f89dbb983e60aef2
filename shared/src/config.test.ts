import { tmpdir } from 'node:os';
import { describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from './config.ts';

/** Expects loadConfig to throw a ConfigError whose message names `variable`; returns the message. */
function expectInvalid(env: Record<string, string>, variable: string): string {
  let error: unknown;
  try {
    loadConfig(env);
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as Error).message).toContain(variable);
  return (error as Error).message;
}

describe('loadConfig defaults', () => {
  const config = loadConfig({});

  it.each([
    ['nodeEnv', 'development'],
    ['databaseUrl', 'postgres://postgres@127.0.0.1:5432/runtasks'],
    ['databasePoolSize', 10],
    ['downloadsPerToken', 4],
    ['downloadsTotal', 5],
    ['downloadsWaitMs', 30000],
    ['downloadsYieldMs', 100],
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
    ['notificationConcurrency', 4],
    ['outboxPollIntervalMs', 2000],
    ['taskVerificationTimeoutSeconds', 10],
    ['taskRetryDelaysMs', [5000, 30000, 120000]],
    ['smtpUrl', undefined],
    ['smtpFrom', 'runtasks <runtasks@localhost>'],
    ['notificationRetryDelaysMs', [5000, 30000, 120000, 600000, 1800000]],
    ['sweeperIntervalMs', 15000],
    ['auditTrailRetentionDays', 90],
    ['configurationVersionMaxBytes', 52428800],
    ['configurationUploadUrlTtlSeconds', 3600],
    ['rateLimitPerSecond', 30],
    ['authCacheTtlMs', 10000],
    ['dashboardReadOnly', true],
    ['pagesSessionTtlSeconds', 28800],
    ['pagesRefreshMs', 5000],
    ['httpCompression', true],
    ['workerHealthPort', 9100],
    ['shutdownDrainDelayMs', 1000],
    ['shutdownTimeoutMs', 25000],
    ['embedded', { mode: 'auto', databaseUrlSet: false, redisUrlSet: false }],
    ['dataDir', '.runtasks'],
    ['startupTimeoutMs', 60000],
    ['authFailuresPerMinute', 20],
    ['trustProxy', false],
    ['planJsonMaxBytes', 52428800],
    ['localTimeouts', { planning: 1800, applying: 3600 }],
    ['redisTopology', { mode: 'single' }],
    ['redisTlsCaFile', undefined],
    ['storage', { backend: 'postgres', quotaBytes: 10737418240, retentionMs: 0 }],
    ['uploadRate', { minBytesPerSecond: 16384, windowMs: 30000 }],
    ['oidc', null],
    ['pagesTokenSignIn', true],
  ] as const)('%s defaults to %j', (key, expected) => {
    expect(config[key]).toEqual(expected);
  });

  it('has no other keys', () => {
    expect(Object.keys(config).sort()).toEqual(
      [
        'adminToken',
        'auditTrailRetentionDays',
        'databasePoolSize',
        'databaseStatementTimeoutMs',
        'databaseUrl',
        'downloadsPerToken',
        'downloadsTotal',
        'downloadsWaitMs',
        'downloadsYieldMs',
        'host',
        'logLevel',
        'nodeEnv',
        'outboxPollIntervalMs',
        'port',
        'publicBaseUrl',
        'queuePrefix',
        'redisUrl',
        'redisTopology',
        'redisTlsCaFile',
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
        'pagesTokenSignIn',
        'pagesRefreshMs',
        'httpCompression',
        'workerHealthPort',
        'shutdownDrainDelayMs',
        'shutdownTimeoutMs',
        'embedded',
        'dataDir',
        'startupTimeoutMs',
        'authFailuresPerMinute',
        'trustProxy',
        'planJsonMaxBytes',
        'localTimeouts',
        'smtpUrl',
        'smtpFrom',
        'notificationRetryDelaysMs',
        'notificationConcurrency',
        'oidc',
        'ciTokenIssuers',
        'ciTokenTtlSeconds',
        'storage',
        'uploadRate',
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
    [{ DATABASE_POOL_SIZE: '40' }, 'downloadsTotal', 20],
    [{ DATABASE_POOL_SIZE: '1' }, 'downloadsTotal', 1],
    [{ DOWNLOADS_TOTAL: '64', DOWNLOADS_PER_TOKEN: '2' }, 'downloadsTotal', 64],
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
    [{ NOTIFICATION_CONCURRENCY: '2' }, 'notificationConcurrency', 2],
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
    [{ LOCAL_PLAN_TIMEOUT_SECONDS: '600' }, 'localTimeouts', { planning: 600, applying: 3600 }],
    [{ LOCAL_APPLY_TIMEOUT_SECONDS: '7200' }, 'localTimeouts', { planning: 1800, applying: 7200 }],
    // The earlier single setting stands for both, where they are not set.
    [{ LOCAL_EXECUTION_TIMEOUT_SECONDS: '900' }, 'localTimeouts', { planning: 900, applying: 900 }],
    [{ LOCAL_EXECUTION_TIMEOUT_SECONDS: '900', LOCAL_APPLY_TIMEOUT_SECONDS: '5400' }, 'localTimeouts', { planning: 900, applying: 5400 }],
    [{ HTTP_COMPRESSION: 'false' }, 'httpCompression', false],
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

describe('loadConfig: Redis Sentinel and Redis Cluster', () => {
  const sentinels = { REDIS_SENTINELS: 's1.internal:26379, s2.internal ,[::1]:26380', REDIS_SENTINEL_NAME: 'mymaster' };
  const cluster = { REDIS_CLUSTER_NODES: '10.0.0.1:7000,10.0.0.2', QUEUE_PREFIX: '{runtasks}' };

  it.each([
    [
      sentinels,
      {
        mode: 'sentinel',
        name: 'mymaster',
        sentinelPassword: undefined,
        sentinels: [
          { host: 's1.internal', port: 26379 },
          { host: 's2.internal', port: 26379 },
          { host: '::1', port: 26380 },
        ],
      },
    ],
    [
      { ...sentinels, REDIS_SENTINEL_PASSWORD: 'sentinel-secret' },
      expect.objectContaining({ mode: 'sentinel', sentinelPassword: 'sentinel-secret' }),
    ],
    [
      cluster,
      {
        mode: 'cluster',
        nodes: [
          { host: '10.0.0.1', port: 7000 },
          { host: '10.0.0.2', port: 6379 },
        ],
      },
    ],
    [{ ...cluster, QUEUE_PREFIX: 'rt-{prod}' }, expect.objectContaining({ mode: 'cluster' })],
    [{ ...cluster, REDIS_URL: 'rediss://:secret@ignored/0' }, expect.objectContaining({ mode: 'cluster' })],
    [{ REDIS_URL: 'redis://cache.internal:6380/2' }, { mode: 'single' }],
  ])('%j → redisTopology %j', (env, expected) => {
    expect(loadConfig(env).redisTopology).toEqual(expected);
  });

  it('takes a CA file for TLS connections', () => {
    expect(loadConfig({ REDIS_URL: 'rediss://cache.internal:6380/0', REDIS_TLS_CA: '/etc/redis/ca.pem' }).redisTlsCaFile).toBe(
      '/etc/redis/ca.pem',
    );
  });

  it.each([
    [sentinels, true],
    [cluster, true],
    [{}, false],
  ])('%j: a Redis is named (no embedded one): %s', (env, named) => {
    expect(loadConfig(env).embedded.redisUrlSet).toBe(named);
  });

  it.each([
    [{ ...sentinels, ...cluster }, 'REDIS_CLUSTER_NODES', 'not both'],
    [{ REDIS_SENTINELS: 's1:26379' }, 'REDIS_SENTINEL_NAME', 'REDIS_SENTINELS needs REDIS_SENTINEL_NAME'],
    [{ REDIS_SENTINEL_NAME: 'mymaster' }, 'REDIS_SENTINEL_NAME', 'REDIS_SENTINELS is not'],
    [{ REDIS_SENTINEL_PASSWORD: 'x' }, 'REDIS_SENTINEL_PASSWORD', 'REDIS_SENTINELS is not'],
    [{ ...sentinels, REDIS_SENTINELS: 's1:99999' }, 'REDIS_SENTINELS', 'not host:port'],
    [{ ...sentinels, REDIS_SENTINELS: 's1:26379,s2:port' }, 'REDIS_SENTINELS', 'not host:port'],
    [{ ...sentinels, REDIS_SENTINELS: ' , ' }, 'REDIS_SENTINELS', 'at least one'],
    [{ ...cluster, QUEUE_PREFIX: 'runtasks' }, 'QUEUE_PREFIX', 'QUEUE_PREFIX=runtasks has no {hash-tag}'],
    [{ ...cluster, QUEUE_PREFIX: 'rt{}' }, 'QUEUE_PREFIX', 'set e.g. QUEUE_PREFIX={runtasks}'],
    [{ ...cluster, REDIS_URL: 'redis://127.0.0.1:7000/3' }, 'REDIS_URL', 'database 0 only'],
    [{ REDIS_TLS_CA: '/etc/redis/ca.pem' }, 'REDIS_TLS_CA', 'rediss://'],
  ])('%j is refused (%s): %s', (env, variable, why) => {
    const message = expectInvalid(env, variable);
    // The reason is one line.
    expect(message.split('\n').filter((line) => line.includes(why))).toHaveLength(1);
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
    ['NOTIFICATION_CONCURRENCY', 'notificationConcurrency', 4],
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
    ['RUN_PAGES_TOKEN_SIGN_IN', 'sometimes'],
    ['OIDC_SCOPES', 'openid  email'],
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
    ['LOCAL_PLAN_TIMEOUT_SECONDS', '0'],
    ['LOCAL_APPLY_TIMEOUT_SECONDS', 'an hour'],
    ['LOCAL_EXECUTION_TIMEOUT_SECONDS', '-1'],
    ['LOG_LEVEL', 'verbose'],
    ['WORKER_CONCURRENCY', '0'],
    ['NOTIFICATION_CONCURRENCY', '0'],
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
    ['HTTP_COMPRESSION', 'gzip'],
    ['STORAGE_BACKEND', 'gcs'],
    ['S3_BUCKET', 'Upper_Case'],
    ['S3_BUCKET', 'ab'],
    ['S3_ENDPOINT', 'minio:9000'],
    ['S3_FORCE_PATH_STYLE', 'maybe'],
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

  it('takes single sign-on only with its issuer, client id and secret together', () => {
    expectInvalid({ OIDC_ISSUER: 'https://idp.example.com' }, 'OIDC_ISSUER');
    expectInvalid({ OIDC_CLIENT_ID: 'runtasks', OIDC_CLIENT_SECRET: 'secret' }, 'OIDC_ISSUER');
    expectInvalid({ OIDC_ISSUER: 'ftp://idp.example.com', OIDC_CLIENT_ID: 'runtasks', OIDC_CLIENT_SECRET: 'secret' }, 'OIDC_ISSUER');
    expectInvalid({ OIDC_ISSUER: 'http://idp.example.com', OIDC_CLIENT_ID: 'runtasks', OIDC_CLIENT_SECRET: 'secret' }, 'OIDC_ISSUER');
    const loopback = { OIDC_CLIENT_ID: 'runtasks', OIDC_CLIENT_SECRET: 'secret' };
    expect(loadConfig({ ...loopback, OIDC_ISSUER: 'http://127.0.0.1:5556/dex' }).oidc?.issuer).toBe('http://127.0.0.1:5556/dex');
    expect(loadConfig({ ...loopback, OIDC_ISSUER: 'http://keycloak.localhost:8080/realms/runtasks' }).oidc).not.toBeNull();
    const config = loadConfig({
      OIDC_ISSUER: 'https://idp.example.com/realms/acme',
      OIDC_CLIENT_ID: 'runtasks',
      OIDC_CLIENT_SECRET: 'secret',
      OIDC_SCOPES: 'email groups',
      OIDC_TEAMS_CLAIM: 'groups',
      RUN_PAGES_TOKEN_SIGN_IN: 'false',
    });
    expect(config.oidc).toEqual({
      issuer: 'https://idp.example.com/realms/acme',
      clientId: 'runtasks',
      clientSecret: 'secret',
      scopes: 'openid email groups',
      teamsClaim: 'groups',
    });
    expect(config.pagesTokenSignIn).toBe(false);
  });

  it('refuses STORAGE_BACKEND=s3 without S3_BUCKET, naming it', () => {
    expect(expectInvalid({ STORAGE_BACKEND: 's3' }, 'S3_BUCKET')).toContain('STORAGE_BACKEND=s3 needs S3_BUCKET');
  });

  it('reads the bucket of STORAGE_BACKEND=s3, and ignores S3_* for postgres', () => {
    const env = { S3_BUCKET: 'runtasks-archives', S3_ENDPOINT: 'http://minio.internal:9000', S3_FORCE_PATH_STYLE: 'true' };
    expect(loadConfig({ ...env, STORAGE_BACKEND: 's3' }).storage.s3).toEqual({
      bucket: 'runtasks-archives',
      endpoint: 'http://minio.internal:9000',
      region: 'us-east-1',
      forcePathStyle: true,
      spoolDir: tmpdir(),
    });
    expect(loadConfig({ ...env, STORAGE_BACKEND: 's3', S3_REGION: 'eu-west-1' }).storage.s3?.region).toBe('eu-west-1');
    expect(loadConfig({ ...env, STORAGE_BACKEND: 's3', STORAGE_SPOOL_DIR: '/var/spool/runtasks' }).storage.s3?.spoolDir).toBe(
      '/var/spool/runtasks',
    );
    expect(loadConfig(env).storage.s3).toBeUndefined();
  });

  it('refuses RUNTASKS_EMBEDDED=always with NODE_ENV=production, which names its services', () => {
    expectInvalid({ NODE_ENV: 'production', RUNTASKS_EMBEDDED: 'always' }, 'RUNTASKS_EMBEDDED');
  });

  it('ConfigError is an Error', () => {
    expect(new ConfigError('x')).toBeInstanceOf(Error);
  });
});
