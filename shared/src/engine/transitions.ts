import { DB_NOW_ISO } from '../db/sql.ts';
import type { RunStatus } from '../domain/statuses.ts';

/**
 * A statement's `$n` parameters, numbered as its text is written: every engine statement uses `$n`,
 * and a text built from parts (the advance's write) numbers them here rather than converting `?`.
 */
export class Params {
  readonly values: unknown[];

  constructor(values: readonly unknown[] = []) {
    this.values = [...values];
  }

  /** The placeholder of `value`, added as the next parameter. */
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

/** A status change of one row, as SQL expressions (parameters, literals or columns). */
export interface Transition {
  /** The new status. */
  status: string;
  /** The `<status>-at` keys it passes (more than one where an advance moves a row several steps). */
  keys: readonly string[];
  /** How many transitions it counts: the version moves by as many. */
  steps?: string;
  /**
   * Which `<status>-at` wins where the key is set already: the first (`first`: a stage that runs again
   * keeps when it first ran) or this one. Ending statuses are reached once, so either gives the same.
   */
  keep?: 'first' | 'latest';
  /** The updated table's alias, where the statement's FROM list could make its columns ambiguous. */
  alias?: string;
}

/**
 * The one rule for a status change of a run, a stage or a result: its status, its `<status>-at` on the
 * database clock, its version moved by the transitions it counts, and its updated_at. Every statement
 * that changes a status sets it through this (runTransition, stageTransition, resultTransition).
 */
function transitionSet(change: Transition): string {
  const column = (name: string): string => (change.alias ? `${change.alias}.${name}` : name);
  const stamps = `jsonb_build_object(${change.keys.map((key) => `${key}, ${DB_NOW_ISO}`).join(', ')})`;
  const timestamps =
    (change.keep ?? 'first') === 'first' ? `${stamps} || ${column('status_timestamps')}` : `${column('status_timestamps')} || ${stamps}`;
  return `status = ${change.status}, status_timestamps = ${timestamps}, version = ${column('version')} + ${change.steps ?? '1'}, updated_at = now()`;
}

/** A run's status change as a `run` CTE body. */
export interface RunTransition {
  /** The status the run ends in. */
  to: RunStatus;
  /** The `<status>-at` keys it passes on the way (their order does not matter), and how many steps it takes. */
  keys: readonly string[];
  steps?: number;
  /** Further `column = expression` assignments. */
  also?: readonly string[];
  /** The condition the run must meet (a parameterized SQL condition). */
  where: string;
  keep?: 'first' | 'latest';
}

/**
 * The one place a run's status is written: `update runs … returning id`, for a statement's `run` CTE.
 * Every run transition (the advance, an action, a pipeline's report) comes through here, so a rule for
 * "a run reached this status" (such as a run that ended freeing its workspace) belongs here.
 */
export function runTransition(params: Params, change: RunTransition): string {
  const set = transitionSet({
    status: params.add(change.to),
    keys: change.keys.map((key) => `${params.add(key)}::text`),
    steps: change.steps === undefined ? '1' : params.add(change.steps),
    keep: change.keep ?? 'first',
  });
  return `update runs set ${[set, ...(change.also ?? [])].join(', ')} where ${change.where} returning id`;
}

/** A task stage's status change, as the SET list of an update of task_stages. */
export const stageTransition = (change: Transition): string => transitionSet(change);

/** A task result's status change, as the SET list of an update of task_results. */
export const resultTransition = (change: Transition): string => transitionSet(change);

/** A row canceled with its run (or as a stage its run never started): its `canceled-at` is this one. */
export const CANCELED: Transition = { status: `'canceled'`, keys: [`'canceled-at'`], keep: 'latest' };
