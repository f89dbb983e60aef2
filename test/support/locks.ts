import pg from 'pg';

/**
 * Takes a lock the way an operator's session would (`statement` inside an open transaction, on a
 * connection of its own) and holds it until `release`, which rolls the transaction back.
 */
export async function holdLock(databaseUrl: string, statement: string): Promise<{ release: () => Promise<void> }> {
  const locker = new pg.Client({ connectionString: databaseUrl });
  await locker.connect();
  await locker.query('begin');
  await locker.query(statement);
  return {
    release: async () => {
      await locker.query('rollback');
      await locker.end();
    },
  };
}
