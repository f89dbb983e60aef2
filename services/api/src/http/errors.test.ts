import { describe, expect, it } from '@jest/globals';
import { DriverException } from '@mikro-orm/core';
import { ApiError } from '@runtasks/shared/errors';
import { toApiError } from './errors.ts';

const withCode = (message: string, code: string): Error => Object.assign(new Error(message), { code });

describe('toApiError: what reaches the client for what was thrown', () => {
  it.each<[string, unknown, number]>([
    ['an ApiError keeps its status', new ApiError(422, 'invalid', 'bad'), 422],
    ['PostgreSQL shutting down (57P01)', withCode('terminating connection due to administrator command', '57P01'), 503],
    ['too many connections (53300)', withCode('sorry, too many clients already', '53300'), 503],
    ['connection failure (08006)', withCode('connection failure', '08006'), 503],
    ['a statement cut off by statement_timeout (57014)', withCode('canceling statement due to statement timeout', '57014'), 503],
    ['a lock refused (55P03)', withCode('could not obtain lock on row in relation "runs"', '55P03'), 503],
    ['not a prefix: 57014 is the whole code', withCode('an unlisted internal failure', '570140'), 500],
    ['connection refused', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'), 503],
    ['pool checkout timeout', new Error('timeout exceeded when trying to connect'), 503],
    ['a connection that ended under a query', new Error('Connection terminated unexpectedly'), 503],
    [
      'the next query of a transaction whose session PostgreSQL terminated',
      new DriverException(new Error('Client has encountered a connection error and is not queryable')),
      503,
    ],
    ['a driver error that is not about availability', new DriverException(withCode('division by zero', '22012')), 500],
    ['a Redis command on a connection that went away', new Error('Connection is closed.'), 503],
    ['a refusal wrapped twice', new Error('outer', { cause: new Error('inner', { cause: withCode('refused', 'ECONNREFUSED') }) }), 503],
    ['anything else', new TypeError('x is undefined'), 500],
  ])('%s → %i', (_name, thrown, status) => {
    const error = toApiError(thrown);
    expect(error.status).toBe(status);
    if (status === 503) expect(error.headers['Retry-After']).toBe('5');
    // Internal messages never leave the process.
    if (status === 500) expect(error.detail).not.toContain((thrown as Error).message);
  });
});
