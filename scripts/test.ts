import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { ConfigError } from '@runtasks/shared/config';
import { EmbeddedError } from '@runtasks/shared/embedded';
import { startOwnServices } from './lib/own-services.ts';

/**
 * `npm test`: checks that PostgreSQL and Redis answer (or starts its own, see ./lib/own-services.ts),
 * runs Jest (ESM needs --experimental-vm-modules), and ends with one plain line, `N passed, N failed`,
 * read from Jest's JSON report.
 */
const REPORT = 'test-results/jest.json';
// Jest writes to a file of this run's own (two runs at once must not read each other's report), which
// then becomes test-results/jest.json.
const OWN_REPORT = `test-results/jest-${process.pid}.json`;

function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port, timeout: 2000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

// With TEST_POSTGRES_URL or TEST_REDIS_URL unset, an embedded PostgreSQL or private Redis may stand in.
const embedded = await startOwnServices({
  purpose: 'test',
  postgres: { variable: 'TEST_POSTGRES_URL', defaultUrl: 'postgres://postgres@127.0.0.1:5432' },
  redis: { variable: 'TEST_REDIS_URL', defaultUrl: 'redis://127.0.0.1:6379/0' },
  say: (line) => process.stderr.write(`${line}\n`),
}).catch((error: unknown) => {
  if (!(error instanceof EmbeddedError || error instanceof ConfigError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
});
// Jest's workers read them from the environment.
if (embedded?.postgres) process.env['TEST_POSTGRES_URL'] = embedded.postgres.url;
if (embedded?.redis) process.env['TEST_REDIS_URL'] = embedded.redis.url;
const postgres = new URL(process.env['TEST_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432');
const redis = new URL(process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0');
const missing: string[] = [];
if (!(await reachable(postgres.hostname, Number(postgres.port || 5432)))) {
  missing.push(
    `PostgreSQL at ${postgres.host} (start it: pg_ctlcluster --skip-systemctl-redirect 15 main start, set TEST_POSTGRES_URL, or leave RUNTASKS_EMBEDDED=auto to embed one)`,
  );
}
if (!(await reachable(redis.hostname, Number(redis.port || 6379)))) {
  missing.push(`Redis at ${redis.host} (start it: redis-server --daemonize yes --bind 127.0.0.1 --port 6379, or set TEST_REDIS_URL)`);
}
// The dashboard's browser test drives Debian's Chromium (playwright-core downloads no browser). Checked only for
// the whole suite, so `npm test -- <paths>` runs without it.
if (process.argv.length <= 2 && !existsSync('/usr/bin/chromium')) {
  missing.push('Chromium at /usr/bin/chromium (install it: apt-get install chromium)');
}
if (missing.length > 0) {
  process.stderr.write(`Tests need running services and a browser; cannot find ${missing.join(' and ')}.\n`);
  await embedded?.stop();
  process.exit(1);
}

mkdirSync('test-results', { recursive: true });
rmSync(OWN_REPORT, { force: true });
const jest = spawn(process.execPath, ['node_modules/jest/bin/jest.js', '--json', `--outputFile=${OWN_REPORT}`, ...process.argv.slice(2)], {
  stdio: ['ignore', 'ignore', 'inherit'],
  env: {
    ...process.env,
    NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --experimental-vm-modules --no-warnings=ExperimentalWarning`.trim(),
  },
});
// Jest ends first on a signal; the embedded services are stopped after it, not under it.
const forward = (signal: NodeJS.Signals): void => void jest.kill(signal);
process.on('SIGINT', forward);
process.on('SIGTERM', forward);
const status = await new Promise<number>((resolve) => jest.once('exit', (code) => resolve(code ?? 1)));
await embedded?.stop();

let summary: string;
try {
  const report = JSON.parse(readFileSync(OWN_REPORT, 'utf8')) as {
    numPassedTests: number;
    numFailedTests: number;
    numPendingTests: number;
    numRuntimeErrorTestSuites: number;
  };
  const failed = report.numFailedTests + report.numRuntimeErrorTestSuites;
  summary = `${report.numPassedTests} passed, ${failed} failed${report.numPendingTests ? `, ${report.numPendingTests} skipped` : ''}`;
  renameSync(OWN_REPORT, REPORT);
} catch {
  summary = '0 passed, 1 failed';
}
process.stdout.write(`${summary}\n`);
process.exit(status);
