import type { MikroORM } from '@mikro-orm/postgresql';
import { genericIndexPool, issueCallbackToken, nativePool, openOrm, resultDeadlines, type RunStage } from '@runtasks/shared';
import type { Pool } from 'pg';
import { advanceRun, type StartedResult, ATTEMPT_LEASE_MS, immediateExecutor, type RunExecutor } from '@runtasks/shared/engine';
import { attachTask, createTask, seedOrganization, type Fixture } from '../../../../test/support/fixtures.ts';
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
    for (let index = 0; index < 2; index += 1)
      await attachTask(h, f, f.workspaceId, await createTask(h, f, taskServer.url), 'mandatory', [...stages]);
    const em = orm.em;
    const advance = (runId: string, executor: RunExecutor = immediateExecutor): Promise<StartedResult[]> =>
      advanceRun(em.fork(), pool, runId, executor, {
        ...resultDeadlines(h.config),
        attemptLeaseSeconds: ATTEMPT_LEASE_MS / 1000,
        issueToken: (resultId) => issueCallbackToken(h.secrets, resultId),
      });
    return { h, orm, f, advance, advancePool: pool, close };
  } catch (error) {
    await close();
    throw error;
  }
}
