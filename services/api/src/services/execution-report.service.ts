import { ApiError, conflict } from '@runtasks/shared/errors';
import { decideReport, type IncomingReport, type ReportDecision, type ReportedRun } from '@runtasks/shared/domain';
import { type Run } from '@runtasks/shared/db';
import { admitAfterRelease, reportTransition, takeReport, type ExecutionReport } from '@runtasks/shared/engine';
import type { Pool } from 'pg';

export { type ExecutionReport } from '@runtasks/shared/engine';

/**
 * A pipeline's reports of a local run: the engine takes them (takeReport there); this decides, from what
 * the run holds and the report's content (the SHA-256 of its plan JSON, its plan file's, its outcome),
 * whether to take it, to answer it again, or to refuse it (shared/src/domain/report-decision.ts).
 */

/** The request header a pipeline gives its binary plan file's SHA-256 in (plan and apply reports). */
export const PLAN_FILE_SHA256_HEADER = 'X-Runtasks-Plan-File-SHA256';

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** The plan file's SHA-256 from its header: null where not given, 400 where it is no SHA-256. */
export function planFileSha256Of(headers: Record<string, string | string[] | undefined>): string | null {
  const value = headers[PLAN_FILE_SHA256_HEADER.toLowerCase()];
  if (value === undefined) return null;
  const text = (Array.isArray(value) ? value.join(',') : value).trim().toLowerCase();
  if (!SHA256_HEX.test(text))
    throw new ApiError(
      400,
      'invalid header',
      `${PLAN_FILE_SHA256_HEADER} must be the plan file's SHA-256 as 64 hexadecimal digits (sha256sum tfplan | cut -d' ' -f1).`,
      { header: PLAN_FILE_SHA256_HEADER },
    );
  return text;
}

export const reportedRunOf = (run: Run): ReportedRun => ({
  status: run.status,
  statusTimestamps: run.statusTimestamps,
  executionError: run.executionError ?? null,
  planJsonSha256: run.planJsonSha256 ?? null,
  planFileSha256: run.planFileSha256 ?? null,
});

/** A refusal as the API answers it: 409 with the rule's title and detail, and both sides of a conflict in `meta`. */
export function refusal(decision: Extract<ReportDecision, { kind: 'refuse' }>): ApiError {
  if (decision.title === 'transition not allowed') return conflict(decision.detail, decision.title);
  return new ApiError(409, decision.title, decision.detail, undefined, {}, decision.meta);
}

/**
 * Takes the report where the run waits for it (`build` makes the engine's report, validating the body:
 * only a report to be taken needs to be a valid one). Where the run moved meanwhile (another report, an
 * action, the timeout), decides again from the run as it is now: a racing identical report is then
 * answered as a repeat. Returns whether this request's report was taken (false: a repeat).
 */
export async function reportExecution(
  pool: Pool,
  run: Run,
  incoming: IncomingReport,
  build: () => ExecutionReport | Promise<ExecutionReport>,
  reload: () => Promise<Run>,
  actorId: string | null,
): Promise<{ taken: boolean; run: Run }> {
  let current = run;
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const decision = decideReport(reportedRunOf(current), incoming);
    if (decision.kind === 'refuse') throw refusal(decision);
    if (decision.kind === 'repeat') return { taken: false, run: current };
    const report = await build();
    if (await takeReport(pool, current.id, report, actorId)) {
      // A report that ends the run releases its workspace: the next run waiting there starts now, not at the sweeper's pass.
      const { from, to } = reportTransition(report);
      await admitAfterRelease(pool, { workspaceId: current.workspace.id, queueState: current.queueState ?? null, from, to });
      return { taken: true, run: await reload() };
    }
    current = await reload();
  }
  throw conflict('The run changed concurrently and no longer takes this report.', 'transition not allowed');
}
