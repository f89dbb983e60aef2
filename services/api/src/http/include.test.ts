import { describe, expect, it } from '@jest/globals';
import { ApiError } from '@runtasks/shared/errors';
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
  ])("%j (allowed %j) → 400 with HCP's title and detail, on source.parameter include", (query, allowed) => {
    const error = includeError(query, allowed);
    expect(error.status).toBe(400);
    expect(error.title).toBe('bad request');
    expect(error.detail).toBe('Invalid include parameter');
    expect(error.source).toEqual({ parameter: 'include' });
    expect(error.meta).toEqual(expect.objectContaining({ reason: expect.any(String), allowed: [...allowed] }));
  });

  it.each(['organization', 'workspace,organization', 'Workspace', 'task_results'])(
    'unknown include %j: meta names it and the allowed values',
    (include) => {
      const unknown = include.split(',').at(-1) ?? '';
      const { meta } = includeError({ include });
      expect(meta).toEqual({ reason: expect.stringContaining(`'${unknown}'`), value: unknown, allowed: [...ALLOWED] });
      expect(meta?.['reason']).toContain('task_stages');
    },
  );

  it('a repeated include: meta says it may be given once and holds every value', () => {
    expect(includeError({ include: ['workspace', 'task_stages'] }).meta).toEqual({
      reason: 'include must be given at most once.',
      value: ['workspace', 'task_stages'],
      allowed: [...ALLOWED],
    });
  });

  it('with nothing allowed, meta says so', () => {
    expect(includeError({ include: 'workspace' }, []).meta).toEqual({
      reason: "'workspace' is not a valid include here; allowed: none.",
      value: 'workspace',
      allowed: [],
    });
  });

  /** What go-tfe's decodeErrorPayload makes of one error object: title, or title + "\n\n" + detail. */
  const goTfeErrorText = (error: ApiError): string => (error.detail ? `${error.title}\n\n${error.detail}` : error.title);

  it('go-tfe\'s error text contains "Invalid include parameter" (→ ErrInvalidIncludeValue) and ends with it (Terraform CLI)', () => {
    for (const query of [{ include: 'nope' }, { include: ['a', 'b'] }]) {
      const text = goTfeErrorText(includeError(query));
      expect(text).toBe('bad request\n\nInvalid include parameter');
      expect(text.includes('Invalid include parameter')).toBe(true);
      expect(text.endsWith('Invalid include parameter')).toBe(true);
    }
  });

  it('the message (logs) carries the same text', () => {
    expect(includeError({ include: 'nope' }).message).toBe('bad request: Invalid include parameter');
  });
});
