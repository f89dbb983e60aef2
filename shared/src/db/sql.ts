/** A timestamptz SQL expression as an ISO-8601 UTC string with milliseconds (`…Z`), as status timestamps are kept. */
export const dbIso = (timestamp: string): string => `to_char((${timestamp}) at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * The database clock as an ISO-8601 UTC string with milliseconds (`…Z`), for status timestamps:
 * every process agrees on one clock, whatever its own says.
 */
export const DB_NOW_ISO = dbIso('now()');

/** A select list of `columns`, each qualified by the table's `alias`. */
export const columnList = (columns: readonly string[], alias: string): string => columns.map((column) => `${alias}.${column}`).join(', ');

/**
 * The ids an ordered subquery selects, as one comma-joined text for `idList` to split, which is far
 * cheaper than pg's parser of a text[] (docs/design.md, "Smaller choices"). An id never holds a comma:
 * `newId` makes every one of a prefix, a hyphen and base62.
 */
export const idListSql = (orderedIds: string): string => `array_to_string(array(${orderedIds}), ',')`;

export const idList = (joined: string): string[] => (joined === '' ? [] : joined.split(','));
