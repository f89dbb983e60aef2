import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { ConfigError, type Config } from '../config.ts';

/** The development key's file, in RUNTASKS_DATA_DIR. */
export const DEV_SECRET_KEY_FILE = 'secret.key';

/**
 * SECRET_KEY keys token hashes and HMAC-key encryption. Production must set it; on a developer's
 * machine one is generated once and kept beside the project so restarts keep tokens valid.
 */
export function resolveSecretKey(config: Config, cwd = process.cwd()): { key: string; generated: boolean } {
  if (config.secretKey) return { key: config.secretKey, generated: false };
  if (config.nodeEnv === 'production') throw new ConfigError('SECRET_KEY is required when NODE_ENV=production (at least 32 characters).');
  const file = resolve(cwd, join(config.dataDir, DEV_SECRET_KEY_FILE));
  if (existsSync(file)) return { key: readFileSync(file, 'utf8').trim(), generated: false };
  mkdirSync(dirname(file), { recursive: true });
  const key = randomBytes(32).toString('base64url');
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { key, generated: true };
}
