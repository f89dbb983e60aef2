/** HCP's levels of an outcome tag, least severe first; a tag without one is `none`. */
export const TAG_LEVELS = ['none', 'info', 'warning', 'error'] as const;
export type TagLevel = (typeof TAG_LEVELS)[number];

export const isTagLevel = (value: unknown): value is TagLevel => (TAG_LEVELS as readonly unknown[]).includes(value);

/**
 * An outcome's severity is the most severe level among its tags (`{ "Severity": [{ "label": "High",
 * "level": "error" }], … }`), `none` without any: as an SQL expression over its `tags` column (jsonb),
 * the level's index in TAG_LEVELS. Anything that is not a list of labels counts as `none`.
 */
export const outcomeSeveritySql = (tags: string): string =>
  `coalesce((select max(case tag->>'level' ${TAG_LEVELS.map((level, index) => `when '${level}' then ${index}`).join(' ')} else 0 end)
     from jsonb_each(case jsonb_typeof(${tags}) when 'object' then ${tags} else '{}' end) as entry(name, labels),
          jsonb_array_elements(case jsonb_typeof(entry.labels) when 'array' then entry.labels else '[]' end) as tag
    where jsonb_typeof(tag) = 'object'), 0)`;
