import { describe, expect, it } from '@jest/globals';
import { connectionName } from './connection-name.ts';

describe('connectionName', () => {
  it.each([
    ['the URL says', 'postgres://u@db:5432/runtasks?application_name=api-eu', { PGAPPNAME: 'other' }, 'api-eu'],
    ['PGAPPNAME says, the URL does not', 'postgres://u@db:5432/runtasks?sslmode=require', { PGAPPNAME: 'from-env' }, 'from-env'],
    ['neither says', 'postgres://u@db:5432/runtasks', {}, 'runtasks'],
    ['the name is percent-encoded', 'postgres://u@db/runtasks?application_name=run%20tasks', {}, 'run tasks'],
  ])('%s', (_, url, env, expected) => {
    expect(connectionName(url, env)).toBe(expected);
  });
});
