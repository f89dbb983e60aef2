import { invalidInclude } from '@runtasks/shared/errors';

type Query = Record<string, string | string[] | undefined>;

/**
 * Parses `include`, accepting hyphen and underscore spellings (HCP's docs and go-tfe disagree) and
 * returning the underscore form. A value we do not serve is HCP's 400 (`invalidInclude`: go-tfe and
 * the Terraform CLI match its detail) with the value and the allowed list in `meta`.
 */
export function parseInclude<const T extends string>(query: Query, allowed: readonly T[]): Set<T> {
  const raw = query['include'];
  if (raw === undefined || raw === '') return new Set();
  if (Array.isArray(raw)) throw invalidInclude({ reason: 'include must be given at most once.', value: raw, allowed });
  const result = new Set<T>();
  for (const name of raw.split(',').map((part) => part.trim())) {
    const normalized = name.replaceAll('-', '_') as T;
    if (!allowed.includes(normalized)) {
      throw invalidInclude({
        reason: `'${name}' is not a valid include here; allowed: ${allowed.join(', ') || 'none'}.`,
        value: name,
        allowed,
      });
    }
    result.add(normalized);
  }
  return result;
}
