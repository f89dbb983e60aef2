import { CANCELED, stageTransition } from './transitions.ts';

// The statements on task stages of an override and a cancel (the advance's are in advance-write.ts, creation's in plan-run.ts).

/** A canceled or discarded run's unfinished stages. */
export const CANCEL_OPEN_STAGES = `update task_stages set ${stageTransition(CANCELED)}
    where run_id = $1 and status in ('pending', 'running', 'awaiting_override')`;

/** An override: the stage runs again, and keeps the running-at of when it first ran. */
export const OVERRIDE = `update task_stages set ${stageTransition({ status: `'running'`, keys: [`'running-at'`] })}
    where id = $1 and status = 'awaiting_override'
    returning id, run_id, stage, status, status_timestamps, created_at, updated_at`;
