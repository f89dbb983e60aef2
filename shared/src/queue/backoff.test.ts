import { describe, expect, it } from '@jest/globals';
import { FIRST_RETRY_MS, JOB_MAX_ATTEMPTS, jobBackoff, ORDINARY_ATTEMPTS, OUTAGE_RETRY_BUDGET_MS, OUTAGE_RETRY_CAP_MS } from './backoff.ts';

const withCode = (message: string, code: string): Error => Object.assign(new Error(message), { code });
const refused = withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED');
const wrapped = Object.assign(new Error('driver error'), {
  cause: withCode('terminating connection due to administrator command', '57P01'),
});
const ordinary = new TypeError('x is undefined');
const NOW = 1_800_000_000_000;
/** A job first due `ago` ms before NOW (created earlier, with a delay). */
const dueAgo = (ago: number) => ({ timestamp: NOW - ago - 60_000, opts: { delay: 60_000 } });

describe('jobBackoff: when a failed job is tried again', () => {
  it.each<[string, number, unknown, number, number, number]>([
    // name, failures so far (this one included), error, ms since first due, jitter, expected delay (-1: fails for good)
    ['an ordinary error is retried from half a second', 1, ordinary, 0, 0, FIRST_RETRY_MS],
    ['an ordinary error doubles', 4, ordinary, 0, 0, 4_000],
    ['an ordinary error fails at the fifth failure, as before', ORDINARY_ATTEMPTS, ordinary, 0, 0, -1],
    ['an outage is retried from half a second', 1, refused, 0, 0, FIRST_RETRY_MS],
    ['an outage outlives the ordinary budget', ORDINARY_ATTEMPTS, refused, 8_000, 0, 8_000],
    ['an outage waits at most the cap', 40, refused, 300_000, 0, OUTAGE_RETRY_CAP_MS],
    ['jitter shortens, never lengthens', 40, refused, 300_000, 0.5, OUTAGE_RETRY_CAP_MS * 0.9],
    ['a wrapped driver error is an outage too', 12, wrapped, 60_000, 0, OUTAGE_RETRY_CAP_MS],
    ['an outage past the budget fails the job', 200, refused, OUTAGE_RETRY_BUDGET_MS, 0, -1],
    ['an ordinary error after an outage fails once the ordinary budget is spent', 12, ordinary, 60_000, 0, -1],
    ['an absurd failure count does not overflow the delay', 5_000, refused, 1_000, 0, OUTAGE_RETRY_CAP_MS],
  ])('%s', (_name, failures, error, sinceDue, jitter, expected) => {
    expect(jobBackoff(failures, error, dueAgo(sinceDue), NOW, jitter)).toBe(expected);
  });

  it('covers an outage of minutes within the ceiling of attempts BullMQ is given', () => {
    let waited = 0;
    let failures = 0;
    for (let delay = 0; delay !== -1;) {
      failures += 1;
      delay = jobBackoff(failures, refused, dueAgo(waited), NOW, 0.999);
      if (delay !== -1) waited += delay;
    }
    expect(waited).toBeGreaterThanOrEqual(OUTAGE_RETRY_BUDGET_MS - OUTAGE_RETRY_CAP_MS);
    expect(failures).toBeLessThan(JOB_MAX_ATTEMPTS);
  });
});
