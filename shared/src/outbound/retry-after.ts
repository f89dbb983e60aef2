/**
 * How long a `Retry-After` header (RFC 9110 §10.2.3) asks to wait, in milliseconds: delta-seconds or an
 * HTTP date; undefined when absent or not understood (the retry then follows its own schedule).
 */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const header = Array.isArray(value) ? value[0] : value;
  if (header === undefined) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Only the three HTTP date forms (IMF-fixdate, RFC 850, asctime), which all open with the day's name:
  // Date.parse alone would take far more. asctime carries no zone and means GMT, not local time.
  if (!/^[A-Za-z]{3,9},? /.test(text)) return undefined;
  const at = Date.parse(/ (GMT|UTC)$/.test(text) ? text : `${text} GMT`);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

/**
 * The delay before the next attempt: the schedule's `baseMs`, or what the task server asked for, kept
 * within [base, 2·base] so that a server can slow its retries down but can neither hammer us nor push
 * the attempt past the window the schedule was made for.
 */
export function retryDelayMs(baseMs: number, retryAfterMs: number | undefined): number {
  if (retryAfterMs === undefined) return baseMs;
  return Math.min(Math.max(retryAfterMs, baseMs), 2 * baseMs);
}
