import { Command, InvalidArgumentError } from 'commander';
import { EDITIONS, newId, type Edition } from '@runtasks/shared/domain';
import { createOwnersTeam, migrateUp, Organization, pendingMigrations, Team } from '@runtasks/shared/db';
import { issueToken } from './auth/tokens.ts';
import { bootstrap, runMain, StartupError, type Runtime } from './bootstrap.ts';

/** Administration from the shell: migrations, organizations and tokens. Tokens are printed once. */
async function withRuntime<T>(work: (runtime: Runtime) => Promise<T>, createDatabase = false): Promise<T> {
  const runtime = await bootstrap({ name: 'runtasks-cli', createDatabase, requireRedis: false });
  try {
    return await work(runtime);
  } finally {
    await runtime.orm.close();
  }
}

function edition(value: string): Edition {
  if (!(EDITIONS as readonly string[]).includes(value)) throw new InvalidArgumentError(`one of ${EDITIONS.join(', ')}`);
  return value as Edition;
}

const program = new Command('runtasks').description('Run Tasks Service administration').exitOverride();

program
  .command('migrate')
  .description('create the database if needed and apply pending migrations')
  .option('--check', 'only report pending migrations; exit 1 when there are any')
  .action(async (options: { check?: boolean }) => {
    await withRuntime(async ({ orm }) => {
      if (options.check) {
        const pending = await pendingMigrations(orm);
        process.stdout.write(pending.length ? `pending: ${pending.join(', ')}\n` : 'up to date\n');
        if (pending.length) process.exitCode = 1;
        return;
      }
      const applied = await migrateUp(orm);
      process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'up to date\n');
    }, true);
  });

program
  .command('orgs:create <name>')
  .description('create an organization')
  .requiredOption('--email <email>', 'contact email of the organization')
  .option('--edition <edition>', 'free or standard', edition, 'standard' as Edition)
  .action(async (name: string, options: { email: string; edition: Edition }) => {
    await withRuntime(async ({ orm }) => {
      const em = orm.em.fork();
      if (await em.count(Organization, { name })) throw new StartupError(`An organization named ${name} already exists.`);
      createOwnersTeam(em, em.create(Organization, { id: newId('organization'), name, email: options.email, edition: options.edition }));
      await em.flush();
      process.stdout.write(`created organization ${name}\n`);
    });
  });

program
  .command('tokens:create')
  .description('create a token and print it once: --admin, --org <name> or --team <team-id>')
  .option('--admin', 'a site-admin token')
  .option('--org <name>', 'the organization token of <name> (replaces the previous one)')
  .option('--team <id>', 'the token of team <id> (replaces the previous one)')
  .option('--description <text>', 'what the token is for')
  .action(async (options: { admin?: boolean; org?: string; team?: string; description?: string }) => {
    const chosen = [options.admin, options.org, options.team].filter(Boolean).length;
    if (chosen !== 1) throw new StartupError('Give exactly one of --admin, --org <name> or --team <id>.');
    await withRuntime(async ({ orm, secrets }) => {
      const em = orm.em.fork();
      const description = options.description ?? null;
      if (options.admin) {
        process.stdout.write(`${(await issueToken(em, secrets, { kind: 'admin', description })).secret}\n`);
      } else if (options.org) {
        const organization = await em.findOne(Organization, { name: options.org });
        if (!organization) throw new StartupError(`No organization named ${options.org}.`);
        process.stdout.write(
          `${(await issueToken(em, secrets, { kind: 'organization', organizationId: organization.id, description })).secret}\n`,
        );
      } else if (options.team) {
        const team = await em.findOne(Team, { id: options.team });
        if (!team) throw new StartupError(`No team with id ${options.team}.`);
        process.stdout.write(`${(await issueToken(em, secrets, { kind: 'team', teamId: team.id, description })).secret}\n`);
      }
    });
  });

runMain(async () => {
  try {
    await program.parseAsync(process.argv);
  } catch (error) {
    // commander has already printed usage errors and help.
    if ((error as { code?: string }).code?.startsWith('commander.')) {
      const exitCode = (error as { exitCode?: number }).exitCode ?? 2;
      process.exit(exitCode === 0 ? 0 : 2);
    }
    throw error;
  }
});
