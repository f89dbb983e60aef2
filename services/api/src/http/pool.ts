import { nativePool } from '@runtasks/shared';
import type { Pool } from 'pg';
import type { ApiContext } from '../context.ts';

/**
 * The process's `pg` pool, for routes that run prepared statements: taken from the ORM itself, so
 * asking for it does not fork the request's unit of work (`ctx.state.em` forks on first use).
 */
export const requestPool = (ctx: ApiContext): Promise<Pool> => nativePool(ctx.deps.orm.em);
