import { describe, expect, it } from '@jest/globals';
import { ConfigSchema } from '@runtasks/shared/config';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

/**
 * docker-compose.yml and the Dockerfile, checked without Docker (our machines have none) against what CI
 * runs: the same commands as the npm scripts, the configuration schema, and the files they name.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

interface Service {
  image?: string;
  build?: string | { context?: string; target?: string };
  command?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  ports?: unknown[];
  container_name?: string;
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test?: string | string[]; disable?: boolean };
  profiles?: string[];
}

// `merge: true` resolves the `<<: *anchor` keys as Docker Compose does.
const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, Service> };
const services = compose.services;
const service = (name: string): Service => {
  const found = services[name];
  if (!found) throw new Error(`docker-compose.yml has no service ${name}`);
  return found;
};

function environment(svc: Service): Record<string, string> {
  const entries = Array.isArray(svc.environment)
    ? svc.environment.map((item) => [item.split('=')[0] ?? '', item.split('=').slice(1).join('=')])
    : Object.entries(svc.environment ?? {}).map(([key, value]) => [key, value === null ? '' : String(value)]);
  return Object.fromEntries(entries);
}

const command = (svc: Service): string => (Array.isArray(svc.command) ? svc.command.join(' ') : (svc.command ?? ''));
const healthTest = (svc: Service): string => [svc.healthcheck?.test ?? []].flat().join(' ');
const dependsOn = (svc: Service): Record<string, string | undefined> =>
  Array.isArray(svc.depends_on)
    ? Object.fromEntries(svc.depends_on.map((name) => [name, undefined]))
    : Object.fromEntries(Object.entries(svc.depends_on ?? {}).map(([name, value]) => [name, value.condition]));
const buildTarget = (svc: Service): string | undefined => (typeof svc.build === 'object' ? svc.build.target : undefined);

const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
const CONFIG_KEYS = new Set(Object.keys(ConfigSchema.in.shape));

interface Stage {
  from: string;
  name: string | undefined;
  instructions: string[];
}

/** The Dockerfile as stages of instructions (continuation lines joined, comments dropped). */
function dockerfileStages(): Stage[] {
  const lines = read('Dockerfile')
    .replace(/\\\r?\n/g, ' ')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  const stages: Stage[] = [];
  for (const line of lines) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (from) stages.push({ from: from[1] ?? '', name: from[2], instructions: [] });
    else stages.at(-1)?.instructions.push(line);
  }
  return stages;
}

describe('docker-compose.yml', () => {
  it('has PostgreSQL 15, Redis 7, migrate, api, worker, the example task server and the tests', () => {
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining(['postgres', 'redis', 'migrate', 'api', 'worker', 'task-server', 'tests']),
    );
    expect(service('postgres').image).toMatch(/^postgres:15(\.|-|$)/);
    expect(service('redis').image).toMatch(/^redis:7(\.|-|$)/);
  });

  it('gives PostgreSQL and Redis healthchecks, and Redis noeviction and AOF', () => {
    expect(healthTest(service('postgres'))).toContain('pg_isready');
    expect(healthTest(service('redis'))).toMatch(/redis-cli.*ping/);
    const redis = command(service('redis'));
    expect(redis).toMatch(/--maxmemory-policy\s+noeviction/);
    expect(redis).toMatch(/--appendonly\s+yes/);
  });

  it('runs the same commands as the npm scripts, on files that exist', () => {
    expect(command(service('api'))).toBe('node services/api/src/main.ts --role api');
    expect(command(service('worker'))).toBe('node services/worker/src/main.ts');
    expect(command(service('migrate'))).toBe('node services/api/src/cli.ts migrate');
    expect(command(service('task-server'))).toBe('node examples/run-task-server/server.ts');
    expect(command(service('api'))).toBe(scripts['start:api']);
    expect(command(service('worker'))).toBe(scripts['start:worker']);
    expect(command(service('migrate'))).toBe(scripts['migrate']);
    for (const name of ['api', 'worker', 'migrate', 'task-server']) {
      const file = command(service(name)).split(' ')[1] ?? '';
      expect(existsSync(join(ROOT, file))).toBe(true);
    }
  });

  it('orders start-up by health: migrate after PostgreSQL, api and worker after migrate and Redis', () => {
    expect(dependsOn(service('migrate'))).toEqual({ postgres: 'service_healthy' });
    for (const name of ['api', 'worker']) {
      expect(dependsOn(service(name))).toMatchObject({ migrate: 'service_completed_successfully', redis: 'service_healthy' });
    }
    expect(dependsOn(service('tests'))).toMatchObject({ postgres: 'service_healthy', redis: 'service_healthy' });
  });

  it('lets the worker scale (no container_name, no ports) and publishes the API on one port', () => {
    const worker = service('worker');
    expect(worker.container_name).toBeUndefined();
    expect(worker.ports).toBeUndefined();
    expect(worker.healthcheck?.disable).not.toBe(true);
    const api = service('api');
    expect(api.ports).toHaveLength(1);
    expect(String(api.ports?.[0])).toMatch(/:3000$/);
    expect(environment(api)['PORT']).toBe('3000');
    expect(environment(api)['HOST']).toBe('0.0.0.0');
    for (const name of ['migrate', 'worker', 'task-server', 'tests', 'postgres', 'redis']) expect(service(name).ports).toBeUndefined();
  });

  it('sets only variables of the configuration schema on migrate, api and worker', () => {
    expect(CONFIG_KEYS.has('DATABASE_URL')).toBe(true);
    for (const name of ['migrate', 'api', 'worker']) {
      const unknown = Object.keys(environment(service(name))).filter((key) => !CONFIG_KEYS.has(key));
      expect({ service: name, unknown }).toEqual({ service: name, unknown: [] });
      expect(environment(service(name))).toMatchObject({
        DATABASE_URL: expect.stringMatching(/@postgres:5432\//),
        REDIS_URL: expect.stringMatching(/^redis:\/\/redis:6379/),
      });
    }
  });

  it('allows task destinations on the compose network only', () => {
    for (const name of ['api', 'worker']) {
      const entries = (environment(service(name))['TASK_DESTINATION_ALLOWLIST'] ?? '')
        .split(',')
        .map((entry) => entry.trim())
        .filter(Boolean);
      expect(entries.length).toBeGreaterThan(0);
      for (const entry of entries) {
        // A service of this file by name, or a private CIDR: never everything, never loopback.
        if (entry.includes('/')) {
          expect(entry).toMatch(/^(10\.|172\.(1[6-9]|2\d|3[01])\.|192\.168\.)/);
        } else {
          expect(Object.keys(services)).toContain(entry);
        }
      }
    }
    expect(environment(service('task-server'))).toMatchObject({ HOST: '0.0.0.0', PORT: expect.stringMatching(/^\d+$/) });
  });

  it('sets only variables the example task server reads', () => {
    const source = read('examples/run-task-server/server.ts');
    // `env['NAME']` and `envNumber('NAME', …)`.
    const readsEnv = new Set([...source.matchAll(/(?:env\['|envNumber\(')([A-Z_]+)'/g)].map((match) => match[1]));
    expect(readsEnv.size).toBeGreaterThan(3);
    for (const key of Object.keys(environment(service('task-server')))) expect(readsEnv).toContain(key);
  });

  it('has a test profile running the suite against the compose PostgreSQL and Redis', () => {
    const tests = service('tests');
    expect(tests.profiles).toEqual(['test']);
    expect(command(tests)).toBe('npm test');
    expect(buildTarget(tests)).toBe('test');
    const env = environment(tests);
    expect(new URL(env['TEST_POSTGRES_URL'] ?? '').hostname).toBe('postgres');
    expect(new URL(env['TEST_REDIS_URL'] ?? '').hostname).toBe('redis');
    // Only the tests and the identity provider are behind a profile: `docker compose up` starts everything else.
    for (const [name, svc] of Object.entries(services)) if (!['tests', 'keycloak'].includes(name)) expect(svc.profiles).toBeUndefined();
  });

  it('has an sso profile with an identity provider pre-configured for the demo organization, and the API takes its settings', () => {
    const keycloak = service('keycloak');
    expect(keycloak.profiles).toEqual(['sso']);
    expect(keycloak.image).toMatch(/^quay\.io\/keycloak\/keycloak:\d+/);
    const issuerBase = environment(keycloak)['KC_HOSTNAME'] ?? '';
    expect(new URL(issuerBase).hostname).toBe('keycloak.localhost');
    const realm = JSON.parse(read('deploy/sso/runtasks-realm.json')) as {
      realm: string;
      clients: {
        clientId: string;
        redirectUris: string[];
        attributes: Record<string, string>;
        protocolMappers: { config: Record<string, string> }[];
      }[];
      users: { email: string; emailVerified: boolean; groups: string[] }[];
    };
    const [client] = realm.clients;
    expect(client?.redirectUris).toEqual(['http://localhost:3000/session/oidc/callback']);
    expect(client?.attributes['pkce.code.challenge.method']).toBe('S256');
    expect(client?.protocolMappers.map((mapper) => mapper.config['claim.name'])).toContain('groups');
    expect(realm.users.every((user) => user.emailVerified && user.groups.length > 0)).toBe(true);
    const api = environment(service('api'));
    for (const key of ['OIDC_ISSUER', 'OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET', 'OIDC_TEAMS_CLAIM', 'RUN_PAGES_TOKEN_SIGN_IN'])
      expect(Object.keys(api)).toContain(key);
  });
});

describe('Dockerfile', () => {
  const stages = dockerfileStages();
  const byName = (name: string): Stage | undefined => stages.find((stage) => stage.name === name);
  const runtime = stages.at(-1) as Stage;

  it('builds on Node 24 in several stages, the runtime last (the default target)', () => {
    expect(stages.length).toBeGreaterThan(1);
    expect(stages[0]?.from).toMatch(/^node:24([.-]|$)/);
    for (const stage of stages) expect(stage.from).toMatch(/^(node:24([.-]|$)|[a-z][\w-]*$)/);
    expect(runtime.name).toBe('runtime');
  });

  it('runs as a non-root user, checks health without curl and starts node in exec form', () => {
    const user = runtime.instructions.filter((line) => /^USER\s/i.test(line)).at(-1);
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^USER\s+(root|0)(:|\s|$)/i);
    const healthcheck = runtime.instructions.find((line) => /^HEALTHCHECK\s/i.test(line)) ?? '';
    expect(healthcheck).toMatch(/CMD\s+\[/);
    expect(healthcheck).not.toMatch(/curl|wget/);
    const cmd = runtime.instructions.filter((line) => /^CMD\s/i.test(line)).at(-1) ?? '';
    const args = JSON.parse(cmd.replace(/^CMD\s+/i, '')) as string[];
    expect(args).toEqual(['node', 'services/api/src/main.ts', '--role', 'api']);
  });

  it("copies every workspace's manifest before npm ci, which refuses a workspace it cannot find", () => {
    const workspaces = (JSON.parse(read('package.json')) as { workspaces: string[] }).workspaces;
    const manifests = byName('manifests')?.instructions ?? [];
    for (const workspace of workspaces) expect(manifests).toContain(`COPY ${workspace}/package.json ${workspace}/`);
  });

  it('has the stages compose builds', () => {
    for (const name of ['migrate', 'api', 'worker', 'task-server', 'tests']) {
      const target = buildTarget(service(name));
      expect(target).toBeDefined();
      expect(byName(target ?? '')).toBeDefined();
    }
    expect(buildTarget(service('api'))).toBe('runtime');
  });
});
