import { randomBytes } from 'node:crypto';
import { HMAC_KEY } from './env.ts';
import { ADMIN_TOKEN, type Stack } from './stack.ts';

/** Seeding: the small things through the API (as a user would), bulk rows with SQL. */

export interface Org {
  name: string;
  id: string;
  token: string;
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** An id in the project's format (prefix-16 alphanumerics), for rows seeded with SQL. */
export function fakeId(prefix: string): string {
  const bytes = randomBytes(16);
  let out = '';
  for (const byte of bytes) out += ALPHABET[byte % 62];
  return `${prefix}-${out}`;
}

export async function createOrg(stack: Stack, name: string): Promise<Org> {
  await stack.expect(
    'POST',
    '/organizations',
    ADMIN_TOKEN,
    { data: { type: 'organizations', attributes: { name, email: `${name}@bench.test` } } },
    201,
  );
  const token = await stack.expect('POST', `/organizations/${name}/authentication-token`, ADMIN_TOKEN, undefined, 201);
  const { rows } = await stack.db.query<{ id: string }>('select id from organizations where name = $1', [name]);
  return { name, id: rows[0]?.id ?? '', token: String(token.body.data?.attributes?.['token']) };
}

export async function createWorkspace(stack: Stack, org: Org, name: string): Promise<string> {
  const response = await stack.expect(
    'POST',
    `/organizations/${org.name}/workspaces`,
    org.token,
    { data: { type: 'workspaces', attributes: { name } } },
    201,
  );
  return response.body.data?.id ?? '';
}

/** A run task pointing at the benchmark task server, with the HMAC key (its creation is verified by a signed POST). */
export async function createTask(stack: Stack, org: Org, name: string): Promise<string> {
  const response = await stack.expect(
    'POST',
    `/organizations/${org.name}/tasks`,
    org.token,
    { data: { type: 'tasks', attributes: { name, url: stack.taskServerUrl, category: 'task', 'hmac-key': HMAC_KEY } } },
    201,
  );
  return response.body.data?.id ?? '';
}

export async function attachTask(stack: Stack, org: Org, workspaceId: string, taskId: string, stages: string[]): Promise<void> {
  await stack.expect(
    'POST',
    `/workspaces/${workspaceId}/tasks`,
    org.token,
    {
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': 'mandatory', stages },
        relationships: { task: { data: { type: 'tasks', id: taskId } } },
      },
    },
    201,
  );
}

export interface PipelineOrg extends Org {
  workspaces: string[];
  taskIds: string[];
}

export const STAGES = ['pre_plan', 'post_plan'];

/**
 * An organization with T mandatory tasks on the pre_plan and post_plan stages (S = 2), and W
 * workspaces each with its own associations to the T tasks. The first workspace and the tasks are
 * made through the API; further workspaces and their associations with SQL (10,000 would take long).
 */
/**
 * A workspace runs one run at a time (the run queue), so a burst over one workspace would measure the
 * queue, not the pipeline: runs are spread over at least this many workspaces, each with the same tasks.
 */
export const QUEUE_LANES = 200;

export async function seedPipelineOrg(stack: Stack, name: string, tasks: number, requestedWorkspaces = 1): Promise<PipelineOrg> {
  const workspaces = Math.max(requestedWorkspaces, QUEUE_LANES);
  const org = await createOrg(stack, name);
  const first = await createWorkspace(stack, org, `${name}-ws-0`);
  const taskIds: string[] = [];
  for (let index = 0; index < tasks; index += 1) taskIds.push(await createTask(stack, org, `${name}-task-${index}`));
  for (const taskId of taskIds) await attachTask(stack, org, first, taskId, STAGES);
  const ids = [first];
  if (workspaces > 1) {
    const extra = Array.from({ length: workspaces - 1 }, () => fakeId('ws'));
    await stack.db.query(
      `insert into workspaces (id, organization_id, name, auto_apply, working_directory, terraform_version, created_at, updated_at)
       select id, $2, $3 || '-ws-' || ord, false, '', '1.9.0', now(), now() from unnest($1::text[]) with ordinality as t(id, ord)`,
      [extra, org.id, name],
    );
    await stack.db.query(
      `insert into workspace_tasks (id, workspace_id, task_id, enforcement_level, stages, created_at, updated_at)
       select 'wstask-' || substr(md5(w.id || t.id), 1, 16), w.id, t.id, 'mandatory', $3::text[], clock_timestamp(), clock_timestamp()
         from unnest($1::text[]) as w(id) cross join unnest($2::text[]) with ordinality as t(id, ord) order by w.id, t.ord`,
      [extra, taskIds, STAGES],
    );
    ids.push(...extra);
  }
  await stack.db.query('analyze');
  return { ...org, workspaces: ids, taskIds };
}

/** `count` run tasks in an organization, with SQL (no HMAC key, never called). */
export async function bulkTasks(stack: Stack, orgId: string, count: number, namePrefix: string): Promise<void> {
  const chunk = 20_000;
  for (let start = 0; start < count; start += chunk) {
    const ids = Array.from({ length: Math.min(chunk, count - start) }, () => fakeId('task'));
    await stack.db.query(
      `insert into run_tasks (id, organization_id, name, url, description, category, enabled, global_enabled, global_stages,
                              global_enforcement_level, created_at, updated_at)
       select id, $2, $3 || '-' || ($4 + ord), 'https://tasks.bench.test/' || ($4 + ord), 'seeded for the read benchmark', 'task', true, false, '{}',
              'advisory', now() - make_interval(secs => ($4 + ord)::int), now()
         from unnest($1::text[]) with ordinality as t(id, ord)`,
      [ids, orgId, namePrefix, start],
    );
  }
  // Vacuumed as autovacuum would have by then: a freshly bulk-loaded table has no visibility map yet.
  await stack.db.query('vacuum analyze run_tasks');
}

/** Empties the run tables between samples (the organizations, workspaces and tasks stay). */
export async function truncateRuns(stack: Stack): Promise<void> {
  await stack.db.query(stack.tables.truncate);
}

/** What the load generator needs to drive the lean reference: it has no organizations, tokens or tasks. */
export const leanOrg = (): PipelineOrg => ({ name: 'lean', id: 'org-lean', token: 'lean', workspaces: ['ws-lean'], taskIds: [] });

/** The run triggers a benchmark configuration subscribes to: all of them, as a team that wants to know everything would. */
const RUN_TRIGGERS = ['run:created', 'run:planning', 'run:needs_attention', 'run:applying', 'run:completed', 'run:errored'];

/**
 * `perWorkspace` enabled generic notification configurations on each of the workspaces, pointing at
 * `url` (a local receiver), with SQL: made through the API each would be verified first, and 400 of them
 * would take a while. No token, so the payloads go unsigned.
 */
export async function seedNotificationConfigurations(
  stack: Stack,
  workspaces: readonly string[],
  perWorkspace: number,
  url: string,
): Promise<number> {
  const ids = workspaces.flatMap(() => Array.from({ length: perWorkspace }, () => fakeId('nc')));
  const owners = workspaces.flatMap((workspace) => Array<string>(perWorkspace).fill(workspace));
  await stack.db.query(
    `insert into notification_configurations (id, workspace_id, name, destination_type, url, enabled, triggers, email_addresses,
                                              email_user_ids, delivery_responses, created_at, updated_at)
     select id, ws, 'bench-' || ord, 'generic', $3, true, $4::jsonb, '[]', '[]', '[]', now(), now()
       from unnest($1::text[], $2::text[]) with ordinality as t(id, ws, ord)`,
    [ids, owners, url, JSON.stringify(RUN_TRIGGERS)],
  );
  await stack.db.query('analyze notification_configurations');
  return ids.length;
}
