/**
 * How much a task server may store in outcomes. HCP's outcomes are short Markdown summaries of
 * findings; these bounds leave room for long reports while keeping one result from growing without end
 * (repeated `running` callbacks each add their outcomes).
 */
export const OUTCOME_LIMITS = {
  /** Outcomes in one callback, across its three lists (each list alone was already capped at this). */
  perCallback: 250,
  /** Outcomes one result keeps, over all its callbacks. */
  perResult: 1000,
  /** Characters of one outcome's `body`. */
  bodyCharacters: 64 * 1024,
  /** Bytes (UTF-8) of all the outcome bodies of one result, over all its callbacks. */
  bodyBytesPerResult: 4 * 1024 * 1024,
} as const;

/** What a result holds already, or what a callback would add. */
export interface OutcomeAmount {
  count: number;
  bodyBytes: number;
}

/** The sentence a refused callback gets when it would take its result past a limit, or undefined when it would not. */
export function outcomeLimitBreach(stored: OutcomeAmount, adding: OutcomeAmount): string | undefined {
  if (stored.count + adding.count > OUTCOME_LIMITS.perResult) {
    return `A task result keeps at most ${OUTCOME_LIMITS.perResult} outcomes; it has ${stored.count} and this callback adds ${adding.count}.`;
  }
  if (stored.bodyBytes + adding.bodyBytes > OUTCOME_LIMITS.bodyBytesPerResult) {
    return `The outcome bodies of a task result may total at most ${OUTCOME_LIMITS.bodyBytesPerResult} bytes; it has ${stored.bodyBytes} and this callback adds ${adding.bodyBytes}.`;
  }
  return undefined;
}
