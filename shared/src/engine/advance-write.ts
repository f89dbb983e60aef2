import type { AdvanceDecision } from '../domain/advance-decision.ts';
import type { CallbackToken } from '../security/secrets.ts';
import { resultStartDeadlines, type ResultDeadlines } from './deadlines.ts';
import { recordClaimedAttempts } from './results.sql.ts';
import { DISPATCH_RESULT_COLUMNS } from './task-payload.ts';
import { CANCELED, Params, resultTransition, runTransition, stageTransition } from './transitions.ts';

/** A result the advance starts, with the token it is issued where it has none yet. */
export interface StartingResult {
  id: string;
  token: CallbackToken | undefined;
}

export interface AdvanceWriteSettings extends ResultDeadlines {
  /** How long a started result's first delivery attempt is leased to the worker that started it. */
  attemptLeaseSeconds: number;
}

/**
 * An advance's decision as one statement (one round trip): the run's status with every `<status>-at` it
 * passed, every moved stage, the started results claimed for their first attempt, and the unstarted
 * stages and results ended. The run's update comes first and holds the version check; every other part
 * applies only where it updated the run (`exists (select from run)`, evaluated once, before any row of
 * theirs is touched).
 */
export function advanceWrite(
  run: { id: string; version: number },
  decision: AdvanceDecision,
  starting: readonly StartingResult[],
  settings: AdvanceWriteSettings,
): { text: string; values: unknown[] } {
  const params = new Params();
  const guard = 'exists (select from run)';
  const parts: string[] = [];
  if (decision.runTransitions.length > 0) {
    const also = [
      ...(decision.warning ? ['has_task_warnings = true'] : []),
      ...(decision.executionError === undefined ? [] : [`execution_error = ${params.add(decision.executionError)}`]),
    ];
    const runId = params.add(run.id);
    const where = `id = ${runId} and version = ${params.add(run.version)}`;
    const keys = [...new Set(decision.runTransitions)];
    parts.push(`run as (${runTransition(params, { to: decision.runStatus, keys, steps: decision.runTransitions.length, also, where })})`);
  } else {
    // Only unstarted stages to end (the run had ended already): the run is locked, not changed. A
    // concurrent change of it is waited for, and where it moved the version, no row.
    parts.push(`run as (select id from runs where id = ${params.add(run.id)} and version = ${params.add(run.version)} for update)`);
  }
  for (const [id, stage] of decision.stageWrites) {
    const keys = [...new Set(stage.keys)].map((key) => `${params.add(key)}::text`);
    const set = stageTransition({ status: params.add(stage.status), keys, steps: params.add(stage.keys.length) });
    parts.push(`stage${parts.length} as (update task_stages set ${set} where id = ${params.add(id)} and ${guard})`);
  }
  if (starting.length > 0) parts.push(startedResults(params, starting, settings, guard));
  if (decision.unstartedStageIds.length > 0) {
    // Not a stage this write moves (none of those is pending after it), nor a result it starts (those are in moved stages).
    const stageIds = params.add(decision.unstartedStageIds);
    parts.push(
      `unstarted_results as (update task_results set ${resultTransition(CANCELED)}
         where task_stage_id = any(${stageIds}::text[]) and status = 'pending' and ${guard})`,
      `unstarted_stages as (update task_stages set ${stageTransition(CANCELED)}
         where id = any(${stageIds}::text[]) and status = 'pending' and ${guard})`,
    );
  }
  // `started` returns an explicit column list, so `started.*` here cannot change under a cached plan.
  const tail = starting.length > 0 ? 'select started.* from run left join started on true' : 'select from run';
  return { text: `with ${parts.join(',\n')} ${tail}`, values: params.values };
}

/**
 * Started results are claimed for their first attempt here (what dispatch's claim does for a retry):
 * leased, with their deadlines, and read with what their payload needs. Their access tokens were issued
 * when they were planned; one planned without (by an earlier version) gets its token now.
 */
function startedResults(params: Params, starting: readonly StartingResult[], settings: AdvanceWriteSettings, guard: string): string {
  const set = resultTransition({ status: `'running'`, keys: [`${params.add('running-at')}::text`], alias: 'tr' });
  const deadlines = resultStartDeadlines(params.add(settings.taskProgressTimeoutSeconds), params.add(settings.taskMaxRuntimeSeconds));
  const lease = params.add(settings.attemptLeaseSeconds);
  const ids = params.add(starting.map((result) => result.id));
  const hashes = params.add(starting.map((result) => result.token?.hash ?? null));
  const encrypted = params.add(starting.map((result) => result.token?.encrypted ?? null));
  return `started as (update task_results tr set ${set}, ${deadlines}, attempts = tr.attempts + 1,
         next_attempt_at = now() + make_interval(secs => ${lease}::double precision),
         callback_token_hash = coalesce(tr.callback_token_hash, t.hash),
         callback_token_encrypted = coalesce(tr.callback_token_encrypted, t.encrypted)
         from unnest(${ids}::text[], ${hashes}::text[], ${encrypted}::text[]) as t(id, hash, encrypted)
       where tr.id = t.id and tr.status = 'pending' and ${guard}
       returning ${DISPATCH_RESULT_COLUMNS}, tr.task_stage_id),
     ${recordClaimedAttempts('started')}`;
}
