/**
 * The database clock as an ISO-8601 UTC string with milliseconds (`…Z`), for status timestamps:
 * every process agrees on one clock, whatever its own says.
 */
export const DB_NOW_ISO = `to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
