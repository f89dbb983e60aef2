import type { EntityManager } from '@mikro-orm/postgresql';
import { ForeignKeyConstraintViolationException } from '@mikro-orm/core';
import { conflict, invalidAttribute } from '@runtasks/shared/errors';
import { newId } from '@runtasks/shared/domain';
import type { Pool } from 'pg';
import type { Instant } from '../http/jsonapi.ts';
import type { Page } from '../http/pagination.ts';
import type { TagReference } from '../routes/tag-schemas.ts';

/**
 * Workspace tags in SQL: every write is one statement, so that concurrent requests naming the same new
 * tag meet on the unique (organization, name) constraint instead of failing on it. The callers have
 * checked the caller's rights on the organization and workspaces they pass.
 */

/** Tags a request names: existing ones by id, and names (created when new). */
export interface TagSelection {
  ids: string[];
  names: string[];
}

export interface TagRow {
  id: string;
  name: string;
  created_at: Instant;
  instance_count: number;
  organization_name: string;
}

const json = (value: unknown): string => JSON.stringify(value);
const distinct = (values: readonly string[]): string[] => [...new Set(values)];
const ELEMENTS = 'select jsonb_array_elements_text(?::jsonb)';

/**
 * Splits references into ids and names; every id must name a tag of the organization, else a 422 at
 * that reference (`pointerOf(index)`). Names are checked by the request schema.
 */
export async function resolveTags(
  em: EntityManager,
  organizationId: string,
  references: readonly TagReference[],
  pointerOf: (index: number) => string,
  extraNames: readonly string[] = [],
): Promise<TagSelection> {
  const ids = distinct(references.flatMap((tag) => (tag.id === undefined ? [] : [tag.id])));
  const referencedNames = references.flatMap((tag) => (tag.id === undefined && tag.attributes?.name ? [tag.attributes.name] : []));
  if (ids.length > 0) {
    const found = await em.execute<{ id: string }[]>(`select id from tags where organization_id = ? and id in (${ELEMENTS})`, [
      organizationId,
      json(ids),
    ]);
    const known = new Set(found.map((row) => row.id));
    const unknown = references.findIndex((tag) => tag.id !== undefined && !known.has(tag.id));
    if (unknown >= 0) throw invalidAttribute(`${pointerOf(unknown)}/id`, 'No tag of this organization has this id.');
  }
  return { ids, names: distinct([...referencedNames, ...extraNames]) };
}

/** Tags the workspaces with the selection, creating the tags named for the first time; tags they have stay. */
export async function linkTags(
  em: EntityManager,
  organizationId: string,
  workspaceIds: readonly string[],
  tags: TagSelection,
): Promise<void> {
  if (workspaceIds.length === 0 || (tags.ids.length === 0 && tags.names.length === 0)) return;
  const created = tags.names.map((name) => ({ id: newId('tag'), name }));
  // `do update` (to the same name) makes the insert return the existing tag's id too.
  await linkingStatement(
    em,
    `with named as (
       insert into tags (id, organization_id, name, created_at)
       select given.id, ?, given.name, now() from jsonb_to_recordset(?::jsonb) as given(id text, name text)
       on conflict (organization_id, name) do update set name = excluded.name
       returning id),
     chosen as (select id from named union select id from tags where organization_id = ? and id in (${ELEMENTS}))
     insert into workspace_tags (workspace_id, tag_id, created_at)
     select target.id, chosen.id, now() from chosen cross join jsonb_array_elements_text(?::jsonb) as target(id)
     on conflict do nothing`,
    [organizationId, json(created), organizationId, json(tags.ids), json(workspaceIds)],
  );
}

/**
 * A tag or workspace deleted between the caller's checks and the link: a conflict to send again, not a
 * 500 (tags already gone are skipped; only one deleted in that very instant reaches the foreign key).
 */
async function linkingStatement(em: EntityManager, sql: string, params: unknown[]): Promise<void> {
  try {
    await em.execute(sql, params);
  } catch (error) {
    if (error instanceof ForeignKeyConstraintViolationException) {
      throw conflict('A tag or workspace of this request was deleted meanwhile; send the request again.');
    }
    throw error;
  }
}

/** Makes the selection the workspace's whole set of tags. */
export async function replaceTags(em: EntityManager, organizationId: string, workspaceId: string, tags: TagSelection): Promise<void> {
  await em.execute('delete from workspace_tags where workspace_id = ?', [workspaceId]);
  await linkTags(em, organizationId, [workspaceId], tags);
}

/** Removes the selected tags from the workspace; tags it does not have are no error. The tags stay in the organization. */
export async function unlinkTags(em: EntityManager, organizationId: string, workspaceId: string, tags: TagSelection): Promise<void> {
  await em.execute(
    `delete from workspace_tags wt using tags t
      where wt.tag_id = t.id and wt.workspace_id = ? and t.organization_id = ?
        and (t.id in (${ELEMENTS}) or t.name in (${ELEMENTS}))`,
    [workspaceId, organizationId, json(tags.ids), json(tags.names)],
  );
}

/** Each workspace's tag names, sorted by code point (as clients sort them): one query for a page of workspaces. */
export async function tagNamesOf(pool: Pool, workspaceIds: readonly string[]): Promise<Map<string, string[]>> {
  const names = new Map<string, string[]>();
  if (workspaceIds.length === 0) return names;
  const { rows } = await pool.query<{ workspace_id: string; names: string[] }>(
    `select wt.workspace_id, array_agg(t.name order by t.name collate "C") as names
       from workspace_tags wt join tags t on t.id = wt.tag_id
      where wt.workspace_id = any($1::text[]) group by wt.workspace_id`,
    [[...workspaceIds]],
  );
  for (const row of rows) names.set(row.workspace_id, row.names);
  return names;
}

const TAG_COLUMNS = `t.id, t.name, t.created_at, o.name as organization_name,
  (select count(*)::int from workspace_tags c where c.tag_id = t.id) as instance_count
  from tags t join organizations o on o.id = t.organization_id`;

/** A page of tags matching `where` (its `?` bound to `params`), by name, and how many match in all. */
async function tagPage(em: EntityManager, where: string, params: unknown[], page: Page): Promise<{ rows: TagRow[]; total: number }> {
  const [count] = await em.execute<{ total: number }[]>(`select count(*)::int as total from tags t where ${where}`, params);
  const rows = await em.execute<TagRow[]>(`select ${TAG_COLUMNS} where ${where} order by t.name collate "C", t.id limit ? offset ?`, [
    ...params,
    page.size,
    page.offset,
  ]);
  return { rows, total: count?.total ?? 0 };
}

const likePattern = (text: string): string => `%${text.replace(/[\\%_]/g, (character) => `\\${character}`)}%`;

/** A workspace's tags, by name; `name` keeps those whose name contains it. */
export function workspaceTags(em: EntityManager, workspaceId: string, name: string | undefined, page: Page) {
  const where = `exists (select 1 from workspace_tags wt where wt.tag_id = t.id and wt.workspace_id = ?)
    and (?::text is null or t.name ilike ? escape '\\')`;
  return tagPage(em, where, [workspaceId, name ?? null, likePattern(name ?? '')], page);
}

/** An organization's tags, by name; `q` keeps names containing it, `excludeWorkspaceId` leaves out that workspace's tags. */
export function organizationTags(
  em: EntityManager,
  organizationId: string,
  q: string | undefined,
  excludeWorkspaceId: string | undefined,
  page: Page,
) {
  const where = `t.organization_id = ? and (?::text is null or t.name ilike ? escape '\\')
    and not exists (select 1 from workspace_tags wt where wt.tag_id = t.id and wt.workspace_id = ?)`;
  return tagPage(em, where, [organizationId, q ?? null, likePattern(q ?? ''), excludeWorkspaceId ?? ''], page);
}

/** The tag with this id, in one of the organizations given (null: in any, for the site admin). */
export async function findTag(
  em: EntityManager,
  tagId: string,
  organizationIds: readonly string[] | null,
): Promise<{ id: string; organization_id: string } | undefined> {
  const rows = await em.execute<{ id: string; organization_id: string }[]>(
    `select id, organization_id from tags where id = ? and (?::jsonb is null or organization_id in (${ELEMENTS}))`,
    [tagId, organizationIds && json(organizationIds), organizationIds && json(organizationIds)],
  );
  return rows[0];
}

/** Deletes the organization's tags (and so their links); every id must be one of its tags, else a 422 naming the first that is not. */
export async function deleteOrganizationTags(em: EntityManager, organizationId: string, ids: readonly string[]): Promise<void> {
  const found = await em.execute<{ id: string }[]>(`select id from tags where organization_id = ? and id in (${ELEMENTS})`, [
    organizationId,
    json(ids),
  ]);
  const known = new Set(found.map((row) => row.id));
  const unknown = ids.findIndex((id) => !known.has(id));
  if (unknown >= 0) throw invalidAttribute(`/data/${unknown}/id`, 'No tag of this organization has this id.');
  await em.execute(`delete from tags where organization_id = ? and id in (${ELEMENTS})`, [organizationId, json(ids)]);
}
