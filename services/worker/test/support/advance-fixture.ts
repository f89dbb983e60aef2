import type { MikroORM } from '@mikro-orm/postgresql';
import { issueCallbackToken, openOrm, resultDeadlines, type RunStage } from '@runtasks/shared';
import { advanceRun, type StartedResult } from '../../src/engine/advance-run.ts';
import { ATTEMPT_LEASE_MS } from '../../src/engine/dispatch.ts';
import { immediateExecutor } from '../../src/engine/executor.ts';
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
  /** One advance of the run, as a `run.created` job makes it (no lock-free look first). */
  advance: (runId: string) => Promise<StartedResult[]>;
  close: () => Promise<void>;
}

/** `connections`: the fixture's own pool (1 where a test reads the prepared statements of the advances' connection). */
export async function startAdvanceFixture(name: string, stages: readonly RunStage[], connections = 4): Promise<AdvanceFixture> {
  const h = await startHarness();
  let orm: MikroORM | undefined;
  let taskServer: ScriptedServer | undefined;
  const close = async (): Promise<void> => {
    await orm?.close();
    await taskServer?.close();
    await h.close();
  };
  try {
    orm = await openOrm(h.config.databaseUrl, connections);
    // Creating a task sends it a verification request; the advances deliver nothing (their caller would).
    taskServer = await startScriptedServer((_delivery, res) => res.writeHead(200).end());
    const f = await seedOrganization(h, name);
    for (let index = 0; index < 2; index += 1)
      await attachTask(h, f, f.workspaceId, await createTask(h, f, taskServer.url), 'mandatory', [...stages]);
    const em = orm.em;
    const advance = (runId: string): Promise<StartedResult[]> =>
      advanceRun(
        em.fork(),
        runId,
        immediateExecutor,
        {
          ...resultDeadlines(h.config),
          attemptLeaseSeconds: ATTEMPT_LEASE_MS / 1000,
          issueToken: (resultId) => issueCallbackToken(h.secrets, resultId),
        },
        { precheck: false },
      );
    return { h, orm, f, advance, close };
  } catch (error) {
    await close();
    throw error;
  }
}
