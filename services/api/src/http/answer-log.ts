import type { Logger } from '@runtasks/shared/logger';
import type { Metrics } from '@runtasks/shared/ops';
import { randomUUID } from 'node:crypto';
import { RefusalLog } from './refusal-log.ts';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** A request as answered, for its metrics and its log line. */
export interface Answered {
  requestId: string;
  method: string;
  /** The route template, not the path: paths can carry capabilities (upload URLs) and ids explode labels. */
  route: string;
  status: number;
  address: string;
  seconds: number;
}

/**
 * Every answered request, whichever part of the API answered it (Koa's chain, or the early refusal before
 * it): its duration in the metrics and its info line, refused requests (a flood of bad tokens) logged as
 * a sample, an address's first, then a summary.
 */
export class AnswerLog {
  private readonly refusals: RefusalLog;
  private readonly logger: Logger;
  private readonly metrics: Metrics;

  constructor(logger: Logger, metrics: Metrics) {
    this.logger = logger;
    this.metrics = metrics;
    this.refusals = new RefusalLog({ logger });
  }

  /** The id a request is answered and logged under: the client's own when it is a sane one. */
  requestId(incoming: string | undefined): string {
    return incoming !== undefined && REQUEST_ID.test(incoming) ? incoming : randomUUID();
  }

  answered(answer: Answered): void {
    this.metrics.httpDuration.observe({ method: answer.method, route: answer.route, status: String(answer.status) }, answer.seconds);
    // Checked first: at the production level the line is dropped, and so need not be built.
    const refused = answer.status === 401 || answer.status === 429;
    if (this.logger.isLevelEnabled('info') && (!refused || this.refusals.record(answer.address, answer.status))) {
      const { requestId, method, route, status } = answer;
      this.logger.info({ requestId, method, route, status, ms: Math.round(answer.seconds * 1000) }, 'request');
    }
  }
}
