import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId } from '@runtasks/shared/domain';
import { JOBS } from '@runtasks/shared/queue';
import { CALLBACK_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import pg from 'pg';
import { api, createRun, eventually, JSON_API, patiently, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * A final callback wakes the run (an outbox event) only when it is the last open result of its stage:
 * earlier verdicts cannot let the run move. The stage row counts its open results (task_results trigger);
 * final callbacks of one stage take turns on that row, so however close together they arrive, exactly one
 * of them wakes the run. No worker runs here:
 * the results are put in `running` with known access tokens directly, as dispatch would.
 */
const TASKS = 3;

describe('callbacks wake the run once per stage', () => {
  let h: Harness;
  let f: Fixture;

  beforeAll(async () => {
    h = await startHarness();
    f = await seedOrganization(h, 'callback-wake');
    const connection = h.orm.em.fork().getConnection();
    const [org] = await connection.execute<{ id: string }[]>(`select id from organizations where name = ?`, [f.organization]);
    for (let index = 0; index < TASKS; index += 1) {
      const taskId = newId('task');
      await connection.execute(
        `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
         values (?, ?, ?, 'https://tasks.example.com/', 'task', true, false, '{}', 'advisory', now(), now())`,
        [taskId, org?.id, `wake-${index}`],
      );
      await connection.execute(
        `insert into workspace_tasks (id, workspace_id, task_id, enforcement_level, stages, created_at, updated_at)
         values (?, ?, ?, 'mandatory', '{post_plan}', now(), now())`,
        [newId('workspaceTask'), f.workspaceId, taskId],
      );
    }
  });

  afterAll(async () => {
    await h?.close();
  });

  /** A run whose post_plan stage is running with its results open, each with a known access token. */
  async function runWithOpenResults(bound = false): Promise<{ runId: string; results: { id: string; token: string }[] }> {
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const connection = h.orm.em.fork().getConnection();
    const rows = await connection.execute<{ id: string }[]>(
      `select tr.id from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = ? order by tr.created_at`,
      [runId],
    );
    expect(rows).toHaveLength(TASKS);
    // As the worker issues them (bound to their result), or as it did before (random).
    const results = rows.map((row) => ({
      id: row.id,
      token: bound ? h.secrets.bindToken(CALLBACK_TOKEN_PREFIX, row.id) : generateToken(CALLBACK_TOKEN_PREFIX),
    }));
    for (const result of results) {
      await connection.execute(
        `update task_results set status = 'running', callback_token_hash = ?, status_timestamps = jsonb_build_object('running-at', now()),
                progress_deadline = now() + interval '10 minutes', hard_deadline = now() + interval '1 hour' where id = ?`,
        [h.secrets.hashToken(result.token), result.id],
      );
    }
    await connection.execute(`update task_stages set status = 'running' where run_id = ?`, [runId]);
    return { runId, results };
  }

  async function wakeEvents(runId: string): Promise<number> {
    const [row] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ count: string }[]>(`select count(*) as count from outbox_events where aggregate_id = ? and topic = ?`, [
        runId,
        JOBS.runAdvance,
      ]);
    return Number(row?.count ?? 0);
  }

  const verdict = (result: { id: string; token: string }, status: 'passed' | 'failed' | 'running') =>
    api(h, 'patch', `/task-results/${result.id}/callback`, result.token, { data: { type: 'task-results', attributes: { status } } });

  it('one after another: progress and the first verdicts wake nothing; the last verdict wakes the run once', async () => {
    const { runId, results } = await runWithOpenResults();
    const [first, second, third] = results as [{ id: string; token: string }, { id: string; token: string }, { id: string; token: string }];
    expect((await verdict(first, 'running')).status).toBe(200);
    expect((await verdict(first, 'passed')).status).toBe(200);
    expect((await verdict(second, 'failed')).status).toBe(200);
    expect(await wakeEvents(runId)).toBe(0);
    expect((await verdict(third, 'passed')).status).toBe(200);
    expect(await wakeEvents(runId)).toBe(1);
  });

  const openResults = async (runId: string): Promise<number> => {
    const [row] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ open_results: number }[]>(`select open_results from task_stages where run_id = ?`, [runId]);
    return Number(row?.open_results);
  };

  it('the stage counts its open results whoever ends them; only the verdict that closes it wakes the run', async () => {
    const { runId, results } = await runWithOpenResults();
    const [first, second, third] = results as [{ id: string; token: string }, { id: string; token: string }, { id: string; token: string }];
    expect(await openResults(runId)).toBe(TASKS);
    // Ended as the sweeper ends it (it wakes the run itself), and a second time, which changes nothing.
    for (let time = 0; time < 2; time += 1) {
      await h.orm.em
        .fork()
        .getConnection()
        .execute(`update task_results set status = 'errored' where id = ? and status in ('pending', 'running')`, [first.id]);
    }
    expect(await openResults(runId)).toBe(TASKS - 1);
    expect((await verdict(second, 'running')).status).toBe(200);
    expect(await openResults(runId)).toBe(TASKS - 1);
    expect((await verdict(second, 'failed')).status).toBe(200);
    expect(await openResults(runId)).toBe(TASKS - 2);
    expect(await wakeEvents(runId)).toBe(0);
    expect((await verdict(third, 'passed')).status).toBe(200);
    expect(await openResults(runId)).toBe(0);
    expect(await wakeEvents(runId)).toBe(1);
    // A refused callback (the result is final) changes neither.
    expect((await verdict(third, 'failed')).status).toBe(409);
    expect([await openResults(runId), await wakeEvents(runId)]).toEqual([0, 1]);
  });

  it('tokens bound to their result: a refusal still comes before an input error, and a binding alone opens nothing', async () => {
    const { results } = await runWithOpenResults(true);
    const [first, second, third] = results as [{ id: string; token: string }, { id: string; token: string }, { id: string; token: string }];
    const invalid = (result: { id: string; token: string }) =>
      api(h, 'patch', `/task-results/${result.id}/callback`, result.token, {
        data: { type: 'task-results', attributes: { status: 'done' } },
      });
    const malformed = (result: { id: string; token: string }) =>
      h.http
        .patch(`/api/v2/task-results/${result.id}/callback`)
        .set('Authorization', `Bearer ${result.token}`)
        .set('Content-Type', 'application/vnd.api+json')
        .send('{"data":');
    expect((await invalid(first)).status).toBe(422);
    expect((await malformed(first)).status).toBe(400);
    expect((await verdict(first, 'passed')).status).toBe(200);
    // Final: 409 whatever the body.
    expect([(await invalid(first)).status, (await malformed(first)).status, (await verdict(first, 'failed')).status]).toEqual([
      409, 409, 409,
    ]);
    // Past its progress deadline (not yet ended by the sweeper): a 409 like a final result, and nothing changes.
    await h.orm.em
      .fork()
      .getConnection()
      .execute(`update task_results set progress_deadline = now() - interval '1 second' where id = ?`, [third.id]);
    expect([(await invalid(third)).status, (await verdict(third, 'running')).status, (await verdict(third, 'passed')).status]).toEqual([
      409, 409, 409,
    ]);
    expect((await verdict(third, 'passed')).body.errors[0].detail).toBe(
      'The task result is past its progress deadline; it ends as errored.',
    );
    await h.orm.em
      .fork()
      .getConnection()
      .execute(`update task_results set progress_deadline = now() + interval '10 minutes' where id = ?`, [third.id]);
    // Past its hard deadline: 401 whatever the body.
    await h.orm.em
      .fork()
      .getConnection()
      .execute(`update task_results set hard_deadline = now() - interval '1 second' where id = ?`, [second.id]);
    expect([(await invalid(second)).status, (await verdict(second, 'passed')).status]).toEqual([401, 401]);
    // Another result's token, and a token bound to this result that was never issued (its hash is not stored).
    const strangers = [
      { id: third.id, token: second.token },
      { id: third.id, token: h.secrets.bindToken(CALLBACK_TOKEN_PREFIX, third.id) },
    ];
    for (const stranger of strangers) {
      expect([(await invalid(stranger)).status, (await malformed(stranger)).status, (await verdict(stranger, 'passed')).status]).toEqual([
        401, 401, 401,
      ]);
    }
    const [row] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ status: string }[]>(`select status from task_results where id = ?`, [third.id]);
    expect(row?.status).toBe('running');
    expect((await verdict(third, 'passed')).status).toBe(200);
  });

  it('all at once, 20 times over: exactly one wake-up per stage, never none', async () => {
    for (let round = 0; round < 20; round += 1) {
      const { runId, results } = await runWithOpenResults();
      const answers = await Promise.all(results.map((result) => verdict(result, 'passed')));
      expect(answers.map((answer) => answer.status)).toEqual(results.map(() => 200));
      expect(await wakeEvents(runId)).toBe(1);
    }
  });

  it('a deadlock with another transaction is retried: the callback still succeeds, once', async () => {
    const { runId, results } = await runWithOpenResults();
    // The callback locks its result and then (the trigger) its stage's row; this transaction takes the
    // stage row first and then the result, which closes a cycle that PostgreSQL breaks by aborting the
    // callback's statement (it has waited longest, so its deadlock check runs first).
    const [first] = results as [{ id: string; token: string }];
    const other = new pg.Client({ connectionString: h.config.databaseUrl });
    await other.connect();
    try {
      // This side checks for a deadlock only after 10 s of waiting, the callback after 1 s: the callback is the one aborted.
      await other.query(`set deadlock_timeout = '10s'`);
      await other.query('begin');
      await other.query('select id from task_stages where run_id = $1 for update', [runId]);
      // supertest sends on `then`: started now, awaited below.
      const answer = Promise.resolve(verdict(first, 'passed'));
      // The callback's connection waits on a lock in this test's database (other suites' databases share the server).
      await eventually(async () => {
        const { rows } = await other.query<{ waiting: string }>(
          `select count(*) as waiting from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`,
        );
        return Number(rows[0]?.waiting) > 0 ? true : undefined;
      });
      await other.query('select id from task_results where id = $1 for update', [first.id]);
      await other.query('commit');
      const response = await answer;
      expect(response.status).toBe(200);
      expect(response.body.data.attributes.status).toBe('passed');
    } finally {
      await other.end();
    }
    expect(await wakeEvents(runId)).toBe(0);
  });

  it("takes HCP's tag levels, and refuses an unknown one with a 422 naming it at its pointer", async () => {
    const { results } = await runWithOpenResults();
    const [first, second] = results as [{ id: string; token: string }, { id: string; token: string }];
    const withLevel = (level: string) => ({
      data: {
        type: 'task-results',
        attributes: { status: 'running' },
        relationships: {
          outcomes: {
            data: [{ type: 'task-result-outcomes', attributes: { 'outcome-id': 'CVE-1', tags: { Severity: [{ label: 'High', level }] } } }],
          },
        },
      },
    });
    for (const level of ['none', 'info', 'warning', 'error'])
      expect({
        level,
        status: (await api(h, 'patch', `/task-results/${first.id}/callback`, first.token, withLevel(level))).status,
      }).toEqual({
        level,
        status: 200,
      });
    const refused = await api(h, 'patch', `/task-results/${second.id}/callback`, second.token, withLevel('critical'));
    expect(refused.status).toBe(422);
    const pointer = '/data/relationships/outcomes/data/0/attributes/tags/Severity/0/level';
    expect(refused.body.errors[0]).toMatchObject({
      status: '422',
      source: { pointer },
      detail: `${pointer} must be one of none, info, warning, error; got "critical"`,
    });
    // A level nested thousands deep is named by its kind: echoed whole, it overflowed the stack (a 500).
    // (Spliced in as text: the test's own JSON.stringify cannot nest that deep either.)
    const deepBody = JSON.stringify(withLevel('DEEP')).replace('"DEEP"', `${'['.repeat(5000)}1${']'.repeat(5000)}`);
    const deep = await patiently(
      h.http
        .patch(`/api/v2/task-results/${second.id}/callback`)
        .set('Authorization', `Bearer ${second.token}`)
        .set('Content-Type', JSON_API)
        .send(deepBody),
    );
    expect({ status: deep.status, error: deep.body.errors[0] }).toMatchObject({
      status: 422,
      error: { source: { pointer }, detail: `${pointer} must be one of none, info, warning, error; got a list` },
    });
    const [row] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ outcomes: string }[]>(`select count(*) as outcomes from task_result_outcomes where task_result_id = ?`, [second.id]);
    expect(row?.outcomes).toBe('0');
  });

  it('an unpaired surrogate escape in an outcome is a 422 at its pointer, and changes nothing', async () => {
    const { runId, results } = await runWithOpenResults();
    const [first] = results as [{ id: string; token: string }];
    const response = await api(h, 'patch', `/task-results/${first.id}/callback`, first.token, {
      data: {
        type: 'task-results',
        attributes: { status: 'passed', outcomes: [{ 'outcome-id': 'o-1', tags: { Severity: [{ label: '\ud800' }] } }] },
      },
    });
    expect(response.status).toBe(422);
    expect(response.body.errors[0].source.pointer).toBe('/data/attributes/outcomes/0/tags/Severity/0/label');
    const [row] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ status: string; outcomes: string }[]>(
        `select status, (select count(*) from task_result_outcomes where task_result_id = ?) as outcomes from task_results where id = ?`,
        [first.id, first.id],
      );
    expect(row).toEqual({ status: 'running', outcomes: '0' });
    expect(await wakeEvents(runId)).toBe(0);
  });
});
