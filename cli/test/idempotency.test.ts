import { describe, expect, it } from '@jest/globals';
import { pipelineAttemptKey } from '../src/idempotency.ts';

const GITHUB = {
  GITHUB_ACTIONS: 'true',
  GITHUB_REPOSITORY: 'acme/infra',
  GITHUB_RUN_ID: '123',
  GITHUB_RUN_ATTEMPT: '1',
  GITHUB_JOB: 'terraform',
};
const GITLAB = { GITLAB_CI: 'true', CI_SERVER_HOST: 'gitlab.example.com', CI_JOB_ID: '987' };

describe('the idempotency key of a pipeline attempt', () => {
  it.each([
    [GITHUB, 'GITHUB_REPOSITORY=acme/infra GITHUB_RUN_ID=123 GITHUB_RUN_ATTEMPT=1 GITHUB_JOB=terraform'],
    [GITLAB, 'CI_SERVER_HOST=gitlab.example.com CI_JOB_ID=987'],
    [{ BUILDKITE: 'true', BUILDKITE_JOB_ID: 'b-1' }, 'BUILDKITE_JOB_ID=b-1'],
    [{ CIRCLECI: 'true', CIRCLE_WORKFLOW_JOB_ID: 'c-1' }, 'CIRCLE_WORKFLOW_JOB_ID=c-1'],
    [
      { TF_BUILD: 'True', SYSTEM_COLLECTIONURI: 'https://dev.azure.com/acme/', SYSTEM_JOBID: 'j', SYSTEM_JOBATTEMPT: '2' },
      'SYSTEM_JOBATTEMPT=2',
    ],
    [{ JENKINS_URL: 'https://ci.acme', BUILD_TAG: 'jenkins-infra-42' }, 'BUILD_TAG=jenkins-infra-42'],
  ])('comes from the CI attempt (%#)', (env, source) => {
    const key = pipelineAttemptKey(env, 'acme/network');
    expect(key?.key).toMatch(/^runtasks-[0-9a-f]{48}$/);
    expect(key?.source).toContain(source);
  });

  it('is the same for the same attempt and workspace, and differs for a new attempt, another job or workspace', () => {
    const key = (env: Record<string, string>, workspace = 'acme/network') => pipelineAttemptKey(env, workspace)?.key;
    expect(key(GITHUB)).toBe(key({ ...GITHUB }));
    expect(
      new Set([key(GITHUB), key({ ...GITHUB, GITHUB_RUN_ATTEMPT: '2' }), key({ ...GITHUB, GITHUB_JOB: 'other' }), key(GITHUB, 'acme/dns')])
        .size,
    ).toBe(4);
  });

  it('is none outside a CI it knows, or where a variable is missing', () => {
    expect(pipelineAttemptKey({}, 'acme/network')).toBeUndefined();
    expect(pipelineAttemptKey({ ...GITHUB, GITHUB_RUN_ID: '' }, 'acme/network')).toBeUndefined();
    expect(pipelineAttemptKey({ GITHUB_RUN_ID: '1', GITHUB_RUN_ATTEMPT: '1' }, 'acme/network')).toBeUndefined();
  });
});
