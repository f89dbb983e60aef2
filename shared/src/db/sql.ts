/** A timestamptz SQL expression as an ISO-8601 UTC string with milliseconds (`…Z`), as status timestamps are kept. */
export const dbIso = (timestamp: string): string => `to_char((${timestamp}) at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * The database clock as an ISO-8601 UTC string with milliseconds (`…Z`), for status timestamps:
 * every process agrees on one clock, whatever its own says.
 */
export const DB_NOW_ISO = dbIso('now()');
