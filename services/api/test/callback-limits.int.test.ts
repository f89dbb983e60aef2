import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId, OUTCOME_LIMITS } from '@runtasks/shared/domain';
import { CALLBACK_TOKEN_PREFIX } from '@runtasks/shared/security';
import { expectError } from '../../../test/support/assertions.ts';
import { api, createRun, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * What a callback may store: links only as http(s) URLs, and outcomes within bounds per callback, per
 * outcome and per result (over all its callbacks). No worker runs: each test's result is put in
 * `running` with a known access token directly, as dispatch would.
 */
describe('callback limits', () => {
  let h: Harness;
  let f: Fixture;

  beforeAll(async () => {
    h = await startHarness();
    f = await seedOrganization(h, 'callback-limits');
    const connection = h.orm.em.fork().getConnection();
    const [org] = await connection.execute<{ id: string }[]>(`select id from organizations where name = ?`, [f.organization]);
    const taskId = newId('task');
    await connection.execute(
      `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
       values (?, ?, 'limits', 'https://tasks.example.com/', 'task', true, false, '{}', 'advisory', now(), now())`,
      [taskId, org?.id],
    );
    await connection.execute(
      `insert into workspace_tasks (id, workspace_id, task_id, enforcement_level, stages, created_at, updated_at)
       values (?, ?, ?, 'mandatory', '{post_plan}', now(), now())`,
      [newId('workspaceTask'), f.workspaceId, taskId],
    );
  });

  afterAll(async () => {
    await h?.close();
  });

  /** A fresh running result with a known (bound) access token. */
  async function openResult(): Promise<{ id: string; token: string }> {
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const connection = h.orm.em.fork().getConnection();
    const [row] = await connection.execute<{ id: string }[]>(
      `select tr.id from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = ?`,
      [runId],
    );
    const id = row?.id ?? '';
    const token = h.secrets.bindToken(CALLBACK_TOKEN_PREFIX, id);
    await connection.execute(
      `update task_results set status = 'running', callback_token_hash = ?, status_timestamps = jsonb_build_object('running-at', now()),
              progress_deadline = now() + interval '10 minutes', hard_deadline = now() + interval '1 hour' where id = ?`,
      [h.secrets.hashToken(token), id],
    );
    return { id, token };
  }

  const callback = (result: { id: string; token: string }, attributes: Record<string, unknown>, relationships?: Record<string, unknown>) =>
    api(h, 'patch', `/task-results/${result.id}/callback`, result.token, {
      data: { type: 'task-results', attributes, ...(relationships ? { relationships } : {}) },
    });

  const outcomes = (count: number, body: string | null = null, prefix = 'o') =>
    Array.from({ length: count }, (_, index) => ({
      type: 'task-result-outcomes',
      attributes: { 'outcome-id': `${prefix}-${index}`, description: 'finding', body },
    }));

  async function stored(resultId: string): Promise<{ rows: number; count: number; url: string | null; status: string }> {
    const connection = h.orm.em.fork().getConnection();
    const [outcomeRows] = await connection.execute<{ count: string }[]>(
      'select count(*) as count from task_result_outcomes where task_result_id = ?',
      [resultId],
    );
    const [result] = await connection.execute<{ outcomes_count: number; url: string | null; status: string }[]>(
      'select outcomes_count, url, status from task_results where id = ?',
      [resultId],
    );
    return {
      rows: Number(outcomeRows?.count),
      count: Number(result?.outcomes_count),
      url: result?.url ?? null,
      status: result?.status ?? '',
    };
  }

  describe('url fields', () => {
    it.each([
      ['javascript:', 'javascript:alert(document.cookie)'],
      ['data:', 'data:text/html,<script>alert(1)</script>'],
      ['a relative path', '/results/1'],
      ['ftp:', 'ftp://files.example.com/report'],
    ])("refuses a callback's url with %s at its pointer, and stores nothing", async (_label, url) => {
      const result = await openResult();
      const res = await callback(result, { status: 'passed', url });
      expect(expectError(res, 422, '/data/attributes/url').detail).toContain('http or https');
      expect(await stored(result.id)).toEqual({ rows: 0, count: 0, url: null, status: 'running' });
    });

    it("refuses an outcome's javascript: url at its pointer, and stores nothing", async () => {
      const result = await openResult();
      const res = await callback(
        result,
        { status: 'passed' },
        { outcomes: { data: [{ type: 'task-result-outcomes', attributes: { 'outcome-id': 'x', url: 'JavaScript:alert(1)' } }] } },
      );
      expectError(res, 422, '/data/relationships/outcomes/data/0/attributes/url');
      expect(await stored(result.id)).toEqual({ rows: 0, count: 0, url: null, status: 'running' });
    });

    it('accepts http and https links, and stores them', async () => {
      const result = await openResult();
      const res = await callback(
        result,
        { status: 'passed', url: 'https://scanner.example.com/runs/1' },
        {
          outcomes: { data: [{ type: 'task-result-outcomes', attributes: { 'outcome-id': 'x', url: 'http://scanner.example.com/f/1' } }] },
        },
      );
      expect(res.status).toBe(200);
      expect(await stored(result.id)).toEqual({ rows: 1, count: 1, url: 'https://scanner.example.com/runs/1', status: 'passed' });
    });
  });

  describe('outcomes', () => {
    it(`refuses more than ${OUTCOME_LIMITS.perCallback} outcomes in one callback across its lists, naming the limit`, async () => {
      const result = await openResult();
      const res = await callback(
        result,
        { status: 'running', outcomes: outcomes(100, null, 'a').map((item) => item.attributes) },
        { outcomes: { data: outcomes(151, null, 'b') } },
      );
      const error = expectError(res, 422, '/data/relationships/outcomes/data');
      expect(error.detail).toContain(`at most ${OUTCOME_LIMITS.perCallback} outcomes`);
      expect(await stored(result.id)).toEqual({ rows: 0, count: 0, url: null, status: 'running' });
    });

    it(`refuses an outcome body over ${OUTCOME_LIMITS.bodyCharacters} characters at its pointer`, async () => {
      const result = await openResult();
      const res = await callback(
        result,
        { status: 'passed' },
        { outcomes: { data: outcomes(1, 'x'.repeat(OUTCOME_LIMITS.bodyCharacters + 1)) } },
      );
      expect(expectError(res, 422, '/data/relationships/outcomes/data/0/attributes/body').detail).toContain(
        `at most ${OUTCOME_LIMITS.bodyCharacters} characters`,
      );
      expect(await stored(result.id)).toEqual({ rows: 0, count: 0, url: null, status: 'running' });
    });

    it(`keeps at most ${OUTCOME_LIMITS.perResult} outcomes per result over repeated running callbacks, then refuses with 422`, async () => {
      const result = await openResult();
      for (let round = 0; round < OUTCOME_LIMITS.perResult / 250; round += 1) {
        expect((await callback(result, { status: 'running' }, { outcomes: { data: outcomes(250, 'short', `r${round}`) } })).status).toBe(
          200,
        );
      }
      const res = await callback(result, { status: 'running' }, { outcomes: { data: outcomes(1, 'one more') } });
      expect(expectError(res, 422, '/data/relationships/outcomes/data').detail).toContain(`at most ${OUTCOME_LIMITS.perResult} outcomes`);
      expect(await stored(result.id)).toEqual({
        rows: OUTCOME_LIMITS.perResult,
        count: OUTCOME_LIMITS.perResult,
        url: null,
        status: 'running',
      });
      // A verdict without outcomes still goes through.
      expect((await callback(result, { status: 'passed' })).status).toBe(200);
      expect((await stored(result.id)).status).toBe('passed');
    });

    it('caps the bytes of a result’s outcome bodies over its callbacks', async () => {
      const result = await openResult();
      const body = 'é'.repeat(OUTCOME_LIMITS.bodyCharacters / 2); // two bytes each: 64 KiB a body
      const perCallback = Math.floor(1_000_000 / Buffer.byteLength(body)); // about 1 MB a callback, well within its body limit
      let accepted = 0;
      for (let round = 0; accepted + perCallback <= OUTCOME_LIMITS.bodyBytesPerResult / Buffer.byteLength(body); round += 1) {
        expect(
          (await callback(result, { status: 'running' }, { outcomes: { data: outcomes(perCallback, body, `r${round}`) } })).status,
        ).toBe(200);
        accepted += perCallback;
      }
      const res = await callback(result, { status: 'running' }, { outcomes: { data: outcomes(perCallback, body, 'over') } });
      expect(expectError(res, 422, '/data/relationships/outcomes/data').detail).toContain(
        `at most ${OUTCOME_LIMITS.bodyBytesPerResult} bytes`,
      );
      expect((await stored(result.id)).rows).toBe(accepted);
    });

    it('two callbacks at once cannot both pass the cap that only one of them fits', async () => {
      const result = await openResult();
      for (let round = 0; round < 3; round += 1) {
        expect((await callback(result, { status: 'running' }, { outcomes: { data: outcomes(250, null, `r${round}`) } })).status).toBe(200);
      }
      const racing = await Promise.all(
        [0, 1].map((side) => callback(result, { status: 'running' }, { outcomes: { data: outcomes(200, null, `side${side}`) } })),
      );
      expect(racing.map((res) => res.status).sort()).toEqual([200, 422]);
      expect(await stored(result.id)).toEqual({ rows: 950, count: 950, url: null, status: 'running' });
    });
  });
});
