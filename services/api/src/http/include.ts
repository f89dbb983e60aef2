import { ApiError } from '@runtasks/shared';

type Query = Record<string, string | string[] | undefined>;

/**
 * Parses `include`, accepting hyphen and underscore spellings (HCP's docs and go-tfe disagree) and
 * returning the underscore form. go-tfe recognises an invalid include by "include parameter" in a 400.
 */
export function parseInclude<const T extends string>(query: Query, allowed: readonly T[]): Set<T> {
  const raw = query['include'];
  if (raw === undefined || raw === '') return new Set();
  if (Array.isArray(raw))
    throw new ApiError(400, 'invalid include parameter', 'include must be given at most once.', { parameter: 'include' });
  const result = new Set<T>();
  for (const name of raw.split(',').map((part) => part.trim())) {
    const normalized = name.replaceAll('-', '_') as T;
    if (!allowed.includes(normalized)) {
      throw new ApiError(
        400,
        'invalid include parameter',
        `'${name}' is not a valid include parameter here; allowed: ${allowed.join(', ') || 'none'}.`,
        { parameter: 'include' },
      );
    }
    result.add(normalized);
  }
  return result;
}
