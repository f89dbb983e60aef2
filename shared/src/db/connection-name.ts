/**
 * The name our connections give PostgreSQL (pg_stat_activity.application_name): the URL's
 * `application_name`, else PGAPPNAME, else `runtasks`, so that on a shared server every connection
 * says whose it is (pg would take PGAPPNAME by itself, but not once a name is given).
 */
export function connectionName(databaseUrl: string, env: NodeJS.ProcessEnv = process.env): string {
  return new URL(databaseUrl).searchParams.get('application_name') ?? env['PGAPPNAME'] ?? 'runtasks';
}
