import { applyStatus, applyTimestamps, planStatus, planTimestamps } from '@runtasks/shared/domain';
import { type Run } from '@runtasks/shared/db';
import { selfLink, type Resource } from '../http/jsonapi.ts';

/** What a plan's and an apply's documents read of their run. */
export type ExecutionView = Pick<
  Run,
  | 'id'
  | 'status'
  | 'statusTimestamps'
  | 'planId'
  | 'applyId'
  | 'executionMode'
  | 'hasChanges'
  | 'resourceAdditions'
  | 'resourceChanges'
  | 'resourceDestructions'
  | 'resourceImports'
  | 'executionError'
  | 'planJsonSha256'
  | 'planFileSha256'
>;

const counts = (run: ExecutionView, shown: boolean): Record<string, number> => ({
  'resource-additions': shown ? run.resourceAdditions : 0,
  'resource-changes': shown ? run.resourceChanges : 0,
  'resource-destructions': shown ? run.resourceDestructions : 0,
  'resource-imports': shown ? run.resourceImports : 0,
});

/**
 * A run's plan in HCP's `plans` shape (what go-tfe's Plan reads): counts once it finished. Beyond HCP's:
 * the SHA-256 of the plan JSON the pipeline reported and of its binary plan file (where given), so a
 * pipeline can refuse to apply a plan file other than the one checked; null before a plan was reported.
 */
export function serializePlan(run: ExecutionView): Resource {
  const status = planStatus(run);
  const finished = status === 'finished';
  return {
    id: run.planId,
    type: 'plans',
    attributes: {
      status,
      'status-timestamps': planTimestamps(run),
      'has-changes': finished && run.hasChanges,
      ...counts(run, finished),
      'execution-details': { mode: run.executionMode },
      'error-message': status === 'errored' ? run.executionError : null,
      'plan-json-sha256': run.planJsonSha256 ?? null,
      'plan-file-sha256': run.planFileSha256 ?? null,
      // No logs are kept: a local run's log stays in its pipeline.
      'log-read-url': null,
    },
    relationships: { run: { data: { type: 'runs', id: run.id } } },
    links: { self: `/api/v2/plans/${run.planId}`, 'json-output': `/api/v2/plans/${run.planId}/json-output` },
  };
}

/** A run's apply in HCP's `applies` shape (what go-tfe's Apply reads): once finished, it applied what the plan counted. */
export function serializeApply(run: ExecutionView): Resource {
  const status = applyStatus(run);
  return {
    id: run.applyId,
    type: 'applies',
    attributes: {
      status,
      'status-timestamps': applyTimestamps(run),
      ...counts(run, status === 'finished'),
      'execution-details': { mode: run.executionMode },
      'error-message': status === 'errored' ? run.executionError : null,
      'log-read-url': null,
    },
    relationships: { run: { data: { type: 'runs', id: run.id } } },
    links: selfLink(`/applies/${run.applyId}`),
  };
}
