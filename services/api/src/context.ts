import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { type Config } from '@runtasks/shared/config';
import { type Logger } from '@runtasks/shared/logger';
import { nativePool } from '@runtasks/shared/db';
import { type RunCreatedJob } from '@runtasks/shared/queue';
import { type TaskClient } from '@runtasks/shared/outbound';
import { type SecretBox } from '@runtasks/shared/security';
import { type Metrics, type ReadinessCheck } from '@runtasks/shared/ops';
import type { Middleware } from 'koa';
import type { Pool } from 'pg';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { ParameterizedContext } from 'koa';
import type { Principal } from './auth/principal.ts';
import type { FailedAuthLimit } from './auth/failed-auth-limit.ts';
import type { PrincipalCache } from './auth/principal-cache.ts';

/** What the API needs from the outside world; built once in main.ts or by a test. */
export interface ApiDeps {
  config: Config;
  orm: MikroORM;
  secrets: SecretBox;
  logger: Logger;
  /** The guarded outbound client; the API uses it for verification requests. */
  taskClient: TaskClient;
  /** Operations; tests may leave it out (then: fresh metrics, a PostgreSQL check, no limits, no dashboard). */
  ops?: Partial<ApiOps>;
}

export interface ApiOps {
  metrics: Metrics;
  /** Beyond PostgreSQL, which is always checked: Redis, pending migrations. */
  readinessChecks: Record<string, ReadinessCheck>;
  isDraining: () => boolean;
  rateLimiter: RateLimiterAbstract | undefined;
  /** bull-board, already behind its own admin guard. */
  dashboard: Middleware | undefined;
  /** Principals by token, forgotten on every change (AUTH_CACHE_TTL_SECONDS=0: none, every request asks the database). */
  principalCache: PrincipalCache | undefined;
  /** Failed authentications by client address (AUTH_FAILURES_PER_MINUTE=0: none counted). */
  authFailures: FailedAuthLimit | undefined;
  /**
   * Publishes a committed run's `run.created` job at once, without waiting (none: the outbox relay
   * publishes it on its next poll, as it does whatever this misses).
   */
  publishRunCreated: ((job: RunCreatedJob) => void) | undefined;
}

export interface ApiState {
  requestId: string;
  principal: Principal;
  /** The request's own EntityManager, forked when first used (the hot routes need only poolOf). */
  em: EntityManager;
  /** Set instead of a principal when a task server reads with a task result's access token. */
  taskAccess?: TaskAccess;
  /** Set by the callback route's authentication: the result its access token claims to open, and the token's hash. */
  callbackAccess?: { resultId: string; tokenHash: string };
  /** Set by the audit trail's authentication: the organization whose trail the token reads. */
  auditTrailOrganizationId?: string;
}

/**
 * A request's state, made once per request by the app's first middleware. Its EntityManager is forked
 * on first use, by a getter of the class: defining one on each request's state object cost every
 * request, and most never use it.
 */
export class RequestState implements ApiState {
  requestId = '';
  // Set by authentication before any route handler runs; a route without it never reads it.
  declare principal: Principal;
  taskAccess?: TaskAccess;
  callbackAccess?: { resultId: string; tokenHash: string };
  auditTrailOrganizationId?: string;
  #em: EntityManager | undefined;
  readonly #orm: MikroORM;

  constructor(orm: MikroORM) {
    this.#orm = orm;
  }

  get em(): EntityManager {
    return (this.#em ??= this.#orm.em.fork());
  }
}

/** What a task result's access token grants: its own callback and its run's plan JSON, while it lives. */
export interface TaskAccess {
  resultId: string;
  runId: string;
}

export interface ApiContextExtras {
  deps: ApiDeps;
}

export type ApiContext = ParameterizedContext<ApiState, ApiContextExtras> & { params: Record<string, string> };

/**
 * The pg pool under the ORM, for the prepared statements of the hot paths. Reaching it touches no
 * identity map, so it needs no EntityManager of the request's own: no fork for requests that use
 * nothing else (docs/design.md, "Smaller choices").
 */
export const poolOf = (ctx: ApiContext): Promise<Pool> => nativePool(ctx.deps.orm.em);
