/**
 * The name our connections give PostgreSQL (pg_stat_activity.application_name): the URL's
 * `application_name`, else PGAPPNAME, else `runtasks`. Needed because MikroORM keeps only the host,
 * port, user, password and database of the URL, and the names tell processes apart on a shared server.
 */
export function connectionName(databaseUrl: string, env: NodeJS.ProcessEnv = process.env): string {
  return new URL(databaseUrl).searchParams.get('application_name') ?? env['PGAPPNAME'] ?? 'runtasks';
}
