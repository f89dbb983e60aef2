import { describe, expect, it } from '@jest/globals';
import { ID_PREFIX, newId, randomAlphanumeric, type IdKind } from './ids.ts';

const KINDS = Object.keys(ID_PREFIX) as IdKind[];

describe('ids', () => {
  it.each([
    ['organization', 'org'],
    ['workspace', 'ws'],
    ['run', 'run'],
    ['plan', 'plan'],
    ['apply', 'apply'],
    ['task', 'task'],
    ['workspaceTask', 'wstask'],
    ['taskStage', 'ts'],
    ['taskResult', 'taskrs'],
    ['taskResultOutcome', 'taskrso'],
    ['team', 'team'],
    ['teamWorkspace', 'tws'],
    ['token', 'at'],
    ['configurationVersion', 'cv'],
    ['comment', 'wsc'],
    ['runEvent', 're'],
    ['tag', 'tag'],
    ['notificationConfiguration', 'nc'],
    ['notificationDelivery', 'ncd'],
    ['user', 'user'],
    ['organizationMembership', 'ou'],
    ['ciTrustRule', 'ctr'],
  ] as const)('newId(%s) is "%s-" followed by 16 alphanumerics', (kind, prefix) => {
    const id = newId(kind);
    expect(id).toMatch(new RegExp(`^${prefix}-[A-Za-z0-9]{16}$`));
  });

  it('the table above covers every kind', () => {
    expect(KINDS.sort()).toEqual(
      [
        'apply',
        'ciTrustRule',
        'comment',
        'configurationVersion',
        'notificationConfiguration',
        'notificationDelivery',
        'organization',
        'organizationMembership',
        'plan',
        'run',
        'runEvent',
        'tag',
        'task',
        'taskResult',
        'taskResultOutcome',
        'taskStage',
        'team',
        'teamWorkspace',
        'token',
        'user',
        'workspace',
        'workspaceTask',
      ].sort(),
    );
  });

  it('prefixes are unique, so an id names its kind', () => {
    const prefixes = Object.values(ID_PREFIX);
    expect(new Set(prefixes).size).toBe(prefixes.length);
  });

  it('ids fit the 32-character id columns', () => {
    for (const kind of KINDS) expect(newId(kind).length).toBeLessThanOrEqual(32);
  });

  it('ids are distinct', () => {
    const ids = Array.from({ length: 5000 }, () => newId('run'));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it.each([1, 8, 16, 17, 64, 500])('randomAlphanumeric(%i) has that length and only alphanumerics', (length) => {
    const value = randomAlphanumeric(length);
    expect(value).toHaveLength(length);
    expect(value).toMatch(/^[A-Za-z0-9]+$/);
  });

  it('randomAlphanumeric defaults to 16 characters', () => {
    expect(randomAlphanumeric()).toMatch(/^[A-Za-z0-9]{16}$/);
  });

  it('randomAlphanumeric(0) is empty', () => {
    expect(randomAlphanumeric(0)).toBe('');
  });

  it('uses the whole alphabet (upper, lower and digits) over many draws', () => {
    const seen = new Set(randomAlphanumeric(20_000));
    expect(seen.size).toBe(62);
  });
});
