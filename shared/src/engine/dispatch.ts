import type { EntityManager } from '@mikro-orm/postgresql';
import { answerExcerpt } from '../outbound/answer-excerpt.ts';
import {
  ACKNOWLEDGE,
  ATTEMPT_FIELDS,
  CLAIM,
  CLAIM_STARTED_AT_CREATION,
  END_UNACKNOWLEDGED,
  RECORD_ATTEMPT,
  RETRY_LATER,
} from './results.sql.ts';
import {
  describeOutcome,
  type DeliveryErrorKind,
  type DeliveryOutcome,
  type TaskClient,
  UNDELIVERABLE_ERROR_KINDS,
} from '../outbound/task-client.ts';
import { issueCallbackToken, type CallbackToken, type SecretBox } from '../security/secrets.ts';
import { nativePool, runPrepared } from '../db/prepared.ts';
import { encodePayload } from '../outbound/payload.ts';
import { retryDelayMs } from '../outbound/retry-after.ts';
import type { Pool } from 'pg';
import { BatchWriter } from './batch-writer.ts';
import { buildTaskPayload, type DispatchRow } from './task-payload.ts';

export interface DispatchDeps {
  secrets: SecretBox;
  taskClient: TaskClient;
  publicBaseUrl: string;
  /** Delays before the second, third, … attempt; its length + 1 is the attempt cap. */
  retryDelaysMs: readonly number[];
  /** Told about every delivery attempt (metrics). */
  onDelivery?: (outcome: DeliveryOutcome) => void;
  /** Where acknowledgements are written (one per process, so they batch). */
  acknowledgements: Acknowledgements;
}

export type DispatchOutcome =
  | { kind: 'skipped' }
  | { kind: 'acknowledged' }
  | { kind: 'retry'; attempt: number; delayMs: number }
  | { kind: 'final'; status: 'errored' | 'unreachable'; runId: string };

/** Retrying cannot help: the destination is refused by policy or the URL is malformed. */
const PERMANENT: ReadonlySet<DeliveryErrorKind> = new Set(['blocked', 'invalid_url']);

/** How long a claimed attempt holds its result: longer than any attempt (connect 5 s + headers 10 s + body 10 s). */
export const ATTEMPT_LEASE_MS = 30_000;

/** Claims the first attempts of a stage started as its run was created (CLAIM_STARTED_AT_CREATION). */
export async function claimStartedAtCreation(em: EntityManager, stageId: string): Promise<DispatchRow[]> {
  return runPrepared<DispatchRow>(await nativePool(em), CLAIM_STARTED_AT_CREATION, [ATTEMPT_LEASE_MS / 1000, stageId]);
}

/**
 * A statement refused for what one of its rows holds (SQLSTATE classes 22, data exception, and 23,
 * integrity constraint violation: an attempt of a result whose workspace was just deleted), not for the
 * connection or the server: the rest of the batch is worth writing without it.
 */
function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('23'));
}

/** At most this many acknowledgements in one statement. */
const ACKNOWLEDGE_BATCH = 200;

/**
 * Acknowledgements written as they come (BatchWriter): those that arrive while one statement is being
 * written go together in the next. Each caller's promise settles when its own is written or failed.
 */
export class Acknowledgements {
  private readonly writer: BatchWriter<unknown[]>;

  constructor(pool: Pool) {
    this.writer = new BatchWriter(
      async (batch) => {
        const columns = ATTEMPT_FIELDS.map((_, column) => batch.map((values) => values[column]));
        await runPrepared(pool, ACKNOWLEDGE, columns);
      },
      ACKNOWLEDGE_BATCH,
      isDataError,
    );
  }

  write(values: unknown[]): Promise<void> {
    return this.writer.write(values);
  }
}

/**
 * What an attempt keeps of the answer, for the people who read the run's delivery attempts: the result's
 * access token is cut out wherever the task server echoed it (those readers must not be able to call
 * back in the task's place).
 */
function attemptExcerpt(outcome: DeliveryOutcome, token: string): string {
  return answerExcerpt(outcome.kind === 'response' ? outcome.bodyExcerpt : outcome.message, [token]);
}

function attemptValues(resultId: string, attempt: number, startedAt: Date, outcome: DeliveryOutcome, token: string): unknown[] {
  return [
    resultId,
    attempt,
    startedAt,
    outcome.durationMs,
    outcome.kind === 'response' ? outcome.status : null,
    outcome.kind === 'error' ? outcome.errorKind : null,
    attemptExcerpt(outcome, token),
  ];
}

async function recordAttempt(
  em: EntityManager,
  resultId: string,
  attempt: number,
  startedAt: Date,
  outcome: DeliveryOutcome,
  token: string,
): Promise<void> {
  await (await nativePool(em)).query(RECORD_ATTEMPT, attemptValues(resultId, attempt, startedAt, outcome, token));
}

/**
 * The token a claimed row's deliveries send: the one stored for it (a result planned before tokens were
 * derived), or else the one derived from its id, which `issued` is too when given.
 */
export function tokenOf(secrets: SecretBox, row: DispatchRow, issued: CallbackToken | undefined): string {
  if (row.callback_token_encrypted !== null) return secrets.decrypt(row.callback_token_encrypted);
  return issued?.token ?? issueCallbackToken(secrets, row.id).token;
}

/**
 * One delivery attempt of a task result: claim it, then deliver it (below). Safe to repeat: the attempt
 * is claimed with a conditional update and final results are left alone.
 */
export async function dispatchResult(em: EntityManager, deps: DispatchDeps, resultId: string): Promise<DispatchOutcome> {
  // A result's token is derived from its id (nothing to store); one planned with a stored token keeps it
  // (the claim never overwrites it), so the task server sees one token per result.
  const issued = issueCallbackToken(deps.secrets, resultId);
  // The claim leases the result, so a duplicated or re-driven job skips it, and a dispatcher that dies
  // mid-attempt leaves a lease the sweeper re-drives once it expires. It returns what the payload needs.
  const [claimed] = await runPrepared<DispatchRow>(await nativePool(em), CLAIM, [
    ATTEMPT_LEASE_MS / 1000,
    issued.hash,
    issued.encrypted,
    resultId,
    deps.retryDelaysMs.length + 1,
  ]);
  if (!claimed) return { kind: 'skipped' };
  return deliverClaimed(em, deps, claimed, tokenOf(deps.secrets, claimed, issued));
}

/**
 * The attempt a claim (above, or the run's advance starting its stage) leased: POST the signed payload,
 * record the attempt, and then either mark it acknowledged (200), schedule a retry inside the progress
 * window, or end it as `unreachable` (never delivered) or `errored` (delivered, never acknowledged).
 */
export async function deliverClaimed(em: EntityManager, deps: DispatchDeps, row: DispatchRow, token: string): Promise<DispatchOutcome> {
  const resultId = row.id;
  const attempt = row.attempts;
  const body = encodePayload(buildTaskPayload(row, token, deps.publicBaseUrl));
  const hmacKey = row.hmac_key_encrypted ? deps.secrets.decrypt(row.hmac_key_encrypted) : null;
  const startedAt = new Date();
  // Never outlives its lease, so a re-drive after the lease never overlaps this attempt.
  const outcome = await deps.taskClient.post(row.task_url, body, hmacKey, AbortSignal.timeout(ATTEMPT_LEASE_MS - 5_000));
  deps.onDelivery?.(outcome);

  if (outcome.kind === 'response' && outcome.status === 200) {
    await deps.acknowledgements.write(attemptValues(resultId, attempt, startedAt, outcome, token));
    return { kind: 'acknowledged' };
  }
  await recordAttempt(em, resultId, attempt, startedAt, outcome, token);
  const pool = await nativePool(em);
  const scheduledMs = deps.retryDelaysMs[attempt - 1];
  const delayMs =
    scheduledMs === undefined ? undefined : retryDelayMs(scheduledMs, outcome.kind === 'response' ? outcome.retryAfterMs : undefined);
  const permanent = outcome.kind === 'error' && PERMANENT.has(outcome.errorKind);
  if (!permanent && delayMs !== undefined) {
    const retry = await pool.query(RETRY_LATER, [delayMs / 1000, resultId, attempt]);
    if (retry.rowCount === 1) return { kind: 'retry', attempt: attempt + 1, delayMs };
  }
  const status = outcome.kind === 'error' && UNDELIVERABLE_ERROR_KINDS.has(outcome.errorKind) ? 'unreachable' : 'errored';
  const message = `Run task request was not acknowledged after ${attempt} attempt${attempt === 1 ? '' : 's'}: ${describeOutcome(outcome)}.`;
  const ended = await pool.query(END_UNACKNOWLEDGED, [status, message, `${status}-at`, resultId, attempt]);
  // No row: a later attempt has the result now (this one outlived its lease), or it is no longer running.
  return ended.rowCount === 1 ? { kind: 'final', status, runId: row.run_id } : { kind: 'skipped' };
}
