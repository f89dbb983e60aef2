import type { MikroORM } from '@mikro-orm/postgresql';
import { genericIndexPool, nativePool, openOrm } from '@runtasks/shared/db';
import { issueCallbackToken } from '@runtasks/shared/security';
import { resultDeadlines } from '@runtasks/shared/engine';
import { type RunStage } from '@runtasks/shared/domain';
import type { Pool } from 'pg';
import { advanceRun, type StartedResult, ATTEMPT_LEASE_MS, immediateExecutor, type RunExecutor } from '@runtasks/shared/engine';
import {
  attachTask,
  createRun,
  createTask,
  createWorkspace,
  seedOrganization,
  uniqueName,
  type Fixture,
} from '../../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../../test/support/harness.ts';
import { startScriptedServer, type ScriptedServer } from '../../../../test/support/scripted-server.ts';

/**
 * An organization whose workspace has two mandatory tasks at `stages`, with no worker running: a test
 * advances its runs itself, one call at a time, and sees exactly what each advance did.
 */
export interface AdvanceFixture {
  h: Harness;
  orm: MikroORM;
  f: Fixture;
  /** One advance of the run, as a job makes it (with the executor that completes plans and applies at once, unless given another). */
  advance: (runId: string, executor?: RunExecutor) => Promise<StartedResult[]>;
  /** The advances' own pool (generic plans by index), as a worker's. */
  advancePool: Pool;
  /**
   * A run in a workspace of its own with the fixture's tasks: one run at a time holds a workspace (the
   * run queue), so runs that must move side by side each get one.
   */
  createRun: (attributes?: Record<string, unknown>) => Promise<string>;
  close: () => Promise<void>;
}

/** `connections`: the size of each of the fixture's pools (1 where a test reads the prepared statements of the advances' connection). */
export async function startAdvanceFixture(name: string, stages: readonly RunStage[], connections = 4): Promise<AdvanceFixture> {
  const h = await startHarness();
  let orm: MikroORM | undefined;
  let advancePool: Pool | undefined;
  let taskServer: ScriptedServer | undefined;
  const close = async (): Promise<void> => {
    await advancePool?.end();
    await orm?.close();
    await taskServer?.close();
    await h.close();
  };
  try {
    orm = await openOrm(h.config.databaseUrl, connections);
    const pool = genericIndexPool(await nativePool(orm.em), connections);
    advancePool = pool;
    // Creating a task sends it a verification request; the advances deliver nothing (their caller would).
    taskServer = await startScriptedServer((_delivery, res) => res.writeHead(200).end());
    const f = await seedOrganization(h, name);
    const taskIds: string[] = [];
    for (let index = 0; index < 2; index += 1) taskIds.push(await createTask(h, f, taskServer.url));
    for (const taskId of taskIds) await attachTask(h, f, f.workspaceId, taskId, 'mandatory', [...stages]);
    const createRunAlone = async (attributes: Record<string, unknown> = {}): Promise<string> => {
      const workspaceId = await createWorkspace(h, f.organization, f.organizationToken, uniqueName(`${name}-ws`));
      for (const taskId of taskIds) await attachTask(h, f, workspaceId, taskId, 'mandatory', [...stages]);
      return createRun(h, f.organizationToken, workspaceId, attributes);
    };
    const em = orm.em;
    const advance = (runId: string, executor: RunExecutor = immediateExecutor): Promise<StartedResult[]> =>
      advanceRun(em.fork(), pool, runId, executor, {
        ...resultDeadlines(h.config),
        attemptLeaseSeconds: ATTEMPT_LEASE_MS / 1000,
        issueToken: (resultId) => issueCallbackToken(h.secrets, resultId),
      });
    return { h, orm, f, advance, advancePool: pool, createRun: createRunAlone, close };
  } catch (error) {
    await close();
    throw error;
  }
}
