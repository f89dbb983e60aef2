/**
 * The exit codes of `runtasks`, one per thing a pipeline may want to tell apart. Documented in
 * docs/pipelines.md; changing a number breaks the pipelines that test for it.
 */
export const EXIT = {
  /** The stage passed (advisory failures only warn): the pipeline may go on. */
  ok: 0,
  /** A mandatory task failed: the run stopped, or waits for an override. */
  blocked: 1,
  /** Wrong arguments, a missing setting or an unreadable file: nothing was sent. */
  usage: 2,
  /** The service refused the token (401). */
  auth: 3,
  /** The service could not be reached or answered with a server error (5xx, or 429 too long). */
  network: 4,
  /** The service refused the request: unknown workspace or run, wrong status, a plan it would not take. */
  refused: 5,
  /** The run ended otherwise: errored outside its tasks, canceled, discarded, or still waiting at --timeout. */
  stopped: 6,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure the CLI explains in one line and ends with `code`; never shown with a stack trace. */
export class CliError extends Error {
  readonly code: ExitCode;
  readonly kind: keyof typeof EXIT;
  /** Print the usage after the line: the command line named no command the CLI knows. */
  readonly showUsage: boolean;

  constructor(kind: Exclude<keyof typeof EXIT, 'ok'>, message: string, showUsage = false) {
    super(message);
    this.name = 'CliError';
    this.kind = kind;
    this.code = EXIT[kind];
    this.showUsage = showUsage;
  }
}

/** What an HTTP status from the service means for the exit code. */
export function exitKindForStatus(status: number): Exclude<keyof typeof EXIT, 'ok' | 'blocked' | 'stopped' | 'usage'> {
  if (status === 401) return 'auth';
  if (status === 429 || status >= 500) return 'network';
  return 'refused';
}
