import { afterAll, describe, expect, it } from '@jest/globals';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import { createSecretBox } from '@runtasks/shared/security';
import { spawnSync } from 'node:child_process';
import { databaseUrl, dropDatabase, PREFIX, withAdminClient } from './support/databases.ts';

const CLI = new URL('../services/api/src/cli.ts', import.meta.url).pathname;
const SECRET_KEY = 'cli-test-secret-key-0123456789abcdefghij';
/** Each call is a Node process that loads the service's code: slow on a busy machine, not a measure of anything. */
const CLI_SPAWN_TIMEOUT = 60_000;
const database = `${PREFIX}_cli_${randomAlphanumeric(6).toLowerCase()}`;

function cli(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [CLI, ...args], {
    env: { PATH: process.env['PATH'] ?? '', DATABASE_URL: databaseUrl(database), SECRET_KEY, LOG_LEVEL: 'silent' },
    encoding: 'utf8',
    timeout: CLI_SPAWN_TIMEOUT,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('admin CLI (docs/operations.md: Admin CLI)', () => {
  afterAll(async () => {
    await withAdminClient((client) => dropDatabase(client, database));
  });

  it(
    'migrates a new database, creates an organization and prints tokens that are stored only hashed',
    async () => {
      const migrate = cli('migrate');
      expect(migrate.status).toBe(0);
      expect(migrate.stdout).toMatch(/applied: Migration/);
      expect(cli('migrate', '--check')).toMatchObject({ status: 0, stdout: 'up to date\n' });

      expect(cli('orgs:create', 'acme', '--email', 'ops@acme.example', '--edition', 'free')).toMatchObject({ status: 0 });
      const duplicate = cli('orgs:create', 'acme', '--email', 'ops@acme.example');
      expect(duplicate.status).toBe(1);
      expect(duplicate.stderr).toContain('already exists');

      const orgToken = cli('tokens:create', '--org', 'acme', '--description', 'ci');
      const adminToken = cli('tokens:create', '--admin');
      expect(orgToken.status).toBe(0);
      expect(adminToken.status).toBe(0);
      const secrets = createSecretBox(SECRET_KEY);
      const [rows, teams] = await withAdminClient(async () => {
        const { default: pg } = await import('pg');
        const client = new pg.Client({ connectionString: databaseUrl(database) });
        await client.connect();
        try {
          return [
            (
              await client.query<{ kind: string; token_hash: string; edition: string | null }>(
                `select t.kind, t.token_hash, o.edition from api_tokens t left join organizations o on o.id = t.organization_id order by t.kind`,
              )
            ).rows,
            (await client.query<{ name: string; is_owners: boolean }>(`select name, is_owners from teams`)).rows,
          ] as const;
        } finally {
          await client.end();
        }
      });
      // The organization came with its owners team.
      expect(teams).toEqual([{ name: 'owners', is_owners: true }]);
      expect(rows).toEqual([
        { kind: 'admin', token_hash: secrets.hashToken(adminToken.stdout.trim()), edition: null },
        { kind: 'organization', token_hash: secrets.hashToken(orgToken.stdout.trim()), edition: 'free' },
      ]);
      expect(JSON.stringify(rows)).not.toContain(orgToken.stdout.trim());
    },
    4 * CLI_SPAWN_TIMEOUT,
  );

  it(
    'refuses ambiguous or unknown targets with one line and a non-zero exit',
    () => {
      const both = cli('tokens:create', '--admin', '--org', 'acme');
      expect(both.status).toBe(1);
      expect(both.stderr.trim().split('\n')).toHaveLength(1);
      expect(cli('tokens:create', '--org', 'nope').stderr).toContain('No organization named nope');
      expect(cli('orgs:create', 'x', '--email', 'a@b.c', '--edition', 'gold').status).toBe(2);
      expect(cli('no-such-command').status).toBe(2);
    },
    4 * CLI_SPAWN_TIMEOUT,
  );
});
