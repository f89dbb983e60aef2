import { describe, expect, it } from '@jest/globals';
import { ApiError } from '@runtasks/shared';
import { parseInclude } from './include.ts';

type Query = Record<string, string | string[] | undefined>;

const ALLOWED = ['task_stages', 'workspace', 'created_by', 'task_stages.task_results'] as const;

function includeError(query: Query, allowed: readonly string[] = ALLOWED): ApiError {
  try {
    parseInclude(query, allowed);
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error(`parseInclude(${JSON.stringify(query)}) did not throw`);
}

describe('parseInclude', () => {
  it.each<[Query, string[]]>([
    [{}, []],
    [{ include: undefined }, []],
    [{ include: '' }, []],
    [{ include: 'workspace' }, ['workspace']],
    [{ include: 'task_stages' }, ['task_stages']],
    [{ include: 'task-stages' }, ['task_stages']],
    [{ include: 'created-by' }, ['created_by']],
    [{ include: 'task-stages.task-results' }, ['task_stages.task_results']],
    [{ include: 'task_stages.task-results' }, ['task_stages.task_results']],
    [{ include: 'task-stages,workspace' }, ['task_stages', 'workspace']],
    [{ include: 'workspace, created_by' }, ['workspace', 'created_by']],
    [{ include: ' workspace ' }, ['workspace']],
    [{ include: 'task-stages,task_stages,workspace' }, ['task_stages', 'workspace']],
    [
      { include: 'workspace,task_stages,created-by,task-stages.task_results' },
      ['workspace', 'task_stages', 'created_by', 'task_stages.task_results'],
    ],
  ])('%j → %j', (query, expected) => {
    expect([...parseInclude(query, ALLOWED)]).toEqual(expected);
  });

  it.each<[Query, readonly string[]]>([
    [{ include: 'organization' }, ALLOWED],
    [{ include: 'workspace,organization' }, ALLOWED],
    [{ include: 'Workspace' }, ALLOWED],
    [{ include: 'task stages' }, ALLOWED],
    [{ include: 'task_results' }, ALLOWED],
    [{ include: 'workspace,' }, ALLOWED],
    [{ include: ',' }, ALLOWED],
    [{ include: 'workspace' }, []],
    [{ include: ['workspace', 'task_stages'] }, ALLOWED],
  ])('%j (allowed %j) → 400 whose detail mentions "include parameter"… or at most once', (query, allowed) => {
    const error = includeError(query, allowed);
    expect(error.status).toBe(400);
    expect(error.title).toContain('include parameter');
    expect(error.source).toEqual({ parameter: 'include' });
    expect(error.detail).toMatch(/include parameter|include must be given at most once/);
  });

  it.each(['organization', 'workspace,organization', 'Workspace', 'task_results'])(
    'unknown include %j: detail contains "include parameter" and names it',
    (include) => {
      const error = includeError({ include });
      expect(error.status).toBe(400);
      expect(error.detail).toContain('include parameter');
      expect(error.detail).toContain(include.split(',').at(-1));
      expect(error.detail).toContain('task_stages');
    },
  );

  it('with nothing allowed, the detail says so', () => {
    expect(includeError({ include: 'workspace' }, []).detail).toContain('allowed: none');
  });

  it('the message (which go-tfe matches) contains "include parameter"', () => {
    expect(includeError({ include: 'nope' }).message).toContain('include parameter');
  });
});
