import type { Pool } from 'pg';

/**
 * The email addresses of users, by id: the one place `email-users` are resolved (the API checks the
 * ids with it, the worker finds the recipients). Only members of the organization count: a person
 * removed from it is no longer mailed about its runs, and an id from another organization is unknown.
 */
export async function emailsOfUsers(pool: Pool, organizationId: string, ids: readonly string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await pool.query<{ id: string; email: string }>(
    `select u.id, u.email from users u
      where u.id = any($2::text[])
        and exists (select 1 from organization_memberships m where m.user_id = u.id and m.organization_id = $1)`,
    [organizationId, [...ids]],
  );
  return new Map(rows.rows.map((row) => [row.id, row.email]));
}
