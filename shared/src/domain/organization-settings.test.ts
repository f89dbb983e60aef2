import { describe, expect, it } from '@jest/globals';
import { isWorkerTimeout, missingAccessDependency, ORGANIZATION_ACCESS_KEYS, type OrganizationAccessKey } from './organization-settings.ts';

const access = (...on: OrganizationAccessKey[]) =>
  Object.fromEntries(ORGANIZATION_ACCESS_KEYS.map((key) => [key, on.includes(key)])) as Record<OrganizationAccessKey, boolean>;

describe('isWorkerTimeout', () => {
  it.each([
    ['24h', true],
    ['2h', true],
    ['1h30m', true],
    ['90m', true],
    ['45s', true],
    ['1h2m3s', true],
    ['', false],
    ['24', false],
    ['h', false],
    ['1d', false],
    ['-1h', false],
    ['1.5h', false],
    ['30m1h', false],
    [' 24h', false],
    ['1'.repeat(20) + 'h', false],
  ])('%j → %s', (value, expected) => {
    expect(isWorkerTimeout(value)).toBe(expected);
  });
});

describe('missingAccessDependency', () => {
  it.each<[OrganizationAccessKey[], ReturnType<typeof missingAccessDependency>]>([
    [[], undefined],
    [['manage-membership'], undefined],
    [['manage-membership', 'manage-teams'], undefined],
    [['manage-membership', 'manage-teams', 'manage-organization-access'], undefined],
    [['manage-teams'], { key: 'manage-teams', needs: 'manage-membership' }],
    [['manage-organization-access'], { key: 'manage-organization-access', needs: 'manage-membership' }],
    [['manage-membership', 'manage-organization-access'], { key: 'manage-organization-access', needs: 'manage-teams' }],
    [['access-secret-teams'], undefined],
    [[...ORGANIZATION_ACCESS_KEYS], undefined],
  ])('%j → %j', (on, expected) => {
    expect(missingAccessDependency(access(...on))).toEqual(expected);
  });

  it('lists the fifteen keys HCP has, once each', () => {
    expect(new Set(ORGANIZATION_ACCESS_KEYS).size).toBe(15);
  });
});
