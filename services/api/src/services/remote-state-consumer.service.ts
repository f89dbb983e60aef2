import { inTransaction, type Workspace } from '@runtasks/shared/db';
import { ApiError, invalidAttribute, notFound } from '@runtasks/shared/errors';
import type { Pool, PoolClient } from 'pg';
import type { Principal } from '../auth/principal.ts';
import { readableWorkspaceParams, WORKSPACE_ROW, workspaceAccessSql } from '../auth/scopes.ts';
import type { Page } from '../http/pagination.ts';

/**
 * Remote state consumers, as HCP Terraform has them: the workspaces of the same organization allowed
 * to read a workspace's state. They matter only while the workspace's `global-remote-state` is false
 * (when true, every workspace of the organization may read it); the service keeps no state versions,
 * so nothing reads state here, and the list is kept and served for clients that manage it.
 */

export type ConsumerChange = 'add' | 'remove' | 'replace';

/** A page of the consumers the caller may read, in name order, and how many there are in all. */
export async function consumerPage(
  pool: Pool,
  principal: Principal,
  workspace: Workspace,
  page: Page,
): Promise<{ ids: string[]; total: number }> {
  const [organization, team] = readableWorkspaceParams(principal, 'read');
  const params: unknown[] = [workspace.id, organization, team];
  // With global-remote-state on, every other workspace of the organization is a consumer (HCP lists them so).
  const base = workspace.globalRemoteState
    ? `from workspaces w where w.organization_id = $${params.push(workspace.organization.id)} and w.id <> $1`
    : `from workspace_remote_state_consumers c join workspaces w on w.id = c.consumer_id where c.workspace_id = $1`;
  const where = `${base} and ${workspaceAccessSql(WORKSPACE_ROW, 2, 3, 'read')}`;
  const count = await pool.query<{ total: number }>(`select count(*)::int as total ${where}`, params);
  const rows = await pool.query<{ id: string }>(
    `select w.id ${where} order by w.name, w.id limit $${params.length + 1} offset $${params.length + 2}`,
    [...params, page.size, page.offset],
  );
  return { ids: rows.rows.map((row) => row.id), total: count.rows[0]?.total ?? 0 };
}

const GLOBAL_DETAIL =
  'Remote state consumers can be changed only while global-remote-state is false: this workspace shares its state with every workspace of its organization.';

/**
 * The subject workspace, locked against a concurrent change of its consumers, and its consumers'
 * rows, locked against deletion until the change commits (a deleted one would break the insert).
 * Every listed id must be a workspace of the same organization; a workspace is never its own
 * consumer (it always reads its own state), and removing it is removing nothing.
 */
async function checkedConsumers(
  client: PoolClient,
  workspaceId: string,
  ids: readonly string[],
  change: ConsumerChange,
): Promise<string[]> {
  const subject = await client.query<{ organization_id: string; global_remote_state: boolean }>(
    `select organization_id, global_remote_state from workspaces where id = $1 for no key update`,
    [workspaceId],
  );
  const row = subject.rows[0];
  if (!row) throw notFound();
  if (row.global_remote_state) throw new ApiError(422, 'invalid request', GLOBAL_DETAIL);
  const found = await client.query<{ id: string }>(
    `select id from workspaces where id = any($1::text[]) and organization_id = $2 order by id for key share`,
    [[...new Set(ids)], row.organization_id],
  );
  const known = new Set(found.rows.map((consumer) => consumer.id));
  ids.forEach((id, index) => {
    if (id === workspaceId && change !== 'remove') {
      throw invalidAttribute(
        `/data/${index}/id`,
        `A workspace cannot be a remote state consumer of itself (it always reads its own state).`,
      );
    }
    if (id !== workspaceId && !known.has(id)) {
      throw invalidAttribute(`/data/${index}/id`, `Workspace ${id} was not found in this workspace's organization.`);
    }
  });
  return [...known];
}

/** Adds (already present: kept), removes (already absent: ignored) or replaces the whole set, in one transaction. */
export async function changeConsumers(pool: Pool, workspaceId: string, ids: readonly string[], change: ConsumerChange): Promise<void> {
  await inTransaction(pool, async (client) => {
    const consumers = await checkedConsumers(client, workspaceId, ids, change);
    if (change === 'remove') {
      await client.query(`delete from workspace_remote_state_consumers where workspace_id = $1 and consumer_id = any($2::text[])`, [
        workspaceId,
        consumers,
      ]);
      return;
    }
    if (change === 'replace') {
      await client.query(`delete from workspace_remote_state_consumers where workspace_id = $1 and not (consumer_id = any($2::text[]))`, [
        workspaceId,
        consumers,
      ]);
    }
    await client.query(
      `insert into workspace_remote_state_consumers (workspace_id, consumer_id)
       select $1, consumer from unnest($2::text[]) as consumer on conflict do nothing`,
      [workspaceId, consumers],
    );
  });
}
