import { createHash } from 'node:crypto';

/**
 * The idempotency key of `run start` in a pipeline: one per attempt of the CI job, so that a step retried
 * within the attempt (by the CLI after a lost connection, or by a retry wrapper) finds the run it created,
 * while a new attempt (a re-run job) starts a run of its own. The workspace is part of it: one job may
 * start runs in several workspaces.
 */
interface CiAttempt {
  /** Where the key came from, for the log. */
  source: string;
  /** The variables whose values make the attempt's identity; all must be set. */
  variables: readonly string[];
  /** Only where this one is also set (the CI's own marker). */
  when: string;
}

/** Each CI's own identity of one attempt of one job; the first that applies wins. */
const ATTEMPTS: readonly CiAttempt[] = [
  // A re-run job (or workflow) gets a new GITHUB_RUN_ATTEMPT; GITHUB_JOB tells the jobs of one workflow run apart.
  {
    source: 'GITHUB_RUN_ID',
    when: 'GITHUB_ACTIONS',
    variables: ['GITHUB_REPOSITORY', 'GITHUB_RUN_ID', 'GITHUB_RUN_ATTEMPT', 'GITHUB_JOB'],
  },
  // A retried GitLab job is a new job with a new CI_JOB_ID.
  { source: 'CI_JOB_ID', when: 'GITLAB_CI', variables: ['CI_SERVER_HOST', 'CI_JOB_ID'] },
  { source: 'BUILDKITE_JOB_ID', when: 'BUILDKITE', variables: ['BUILDKITE_JOB_ID'] },
  { source: 'CIRCLE_WORKFLOW_JOB_ID', when: 'CIRCLECI', variables: ['CIRCLE_WORKFLOW_JOB_ID'] },
  { source: 'SYSTEM_JOBID', when: 'TF_BUILD', variables: ['SYSTEM_COLLECTIONURI', 'SYSTEM_JOBID', 'SYSTEM_JOBATTEMPT'] },
  { source: 'BUILD_TAG', when: 'JENKINS_URL', variables: ['JENKINS_URL', 'BUILD_TAG'] },
];

/** The key for this CI attempt and workspace, or none outside a CI the CLI knows (then a retried start creates a new run). */
export function pipelineAttemptKey(
  env: Record<string, string | undefined>,
  workspace: string,
): { key: string; source: string } | undefined {
  for (const attempt of ATTEMPTS) {
    if (!env[attempt.when]) continue;
    const values = attempt.variables.map((name) => env[name]);
    if (values.some((value) => !value)) continue;
    // Hashed: a fixed length and character set whatever the CI's values hold, and no repository names in the service's tables.
    const digest = createHash('sha256')
      .update(JSON.stringify([attempt.source, ...values, workspace]))
      .digest('hex');
    return { key: `runtasks-${digest.slice(0, 48)}`, source: attempt.variables.map((name, i) => `${name}=${values[i]}`).join(' ') };
  }
  return undefined;
}
