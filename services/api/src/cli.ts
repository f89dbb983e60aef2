import { Command, InvalidArgumentError } from 'commander';
import { EDITIONS, newId, type Edition } from '@runtasks/shared/domain';
import { createOwnersTeam, migrateUp, Organization, pendingMigrations, Team, User } from '@runtasks/shared/db';
import { issueToken } from './auth/tokens.ts';
import { bootstrap, runMain, StartupError, type Runtime } from './bootstrap.ts';
import { createUser, findUserByEmail } from './services/users.service.ts';

/** Administration from the shell: migrations, organizations, users and tokens. Tokens are printed once. */
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

program
  .command('users:create')
  .description('create a person (a user); --admin makes them a site admin')
  .requiredOption('--email <email>', 'their email address')
  .option('--username <name>', 'their username (default: from the email address)')
  .option('--admin', "a site admin: acts with the site admin's rights and may create organizations")
  .action(async (options: { email: string; username?: string; admin?: boolean }) => {
    await withRuntime(async ({ orm }) => {
      const em = orm.em.fork();
      if (await findUserByEmail(em, options.email))
        throw new StartupError(`A user with the email address ${options.email} already exists.`);
      if (options.username && (await em.count(User, { username: options.username })))
        throw new StartupError(`The username ${options.username} is taken.`);
      const user = await createUser(em, { email: options.email, username: options.username, isAdmin: options.admin === true });
      await em.flush();
      process.stdout.write(`created user ${user.username} (${user.id})\n`);
    });
  });

program
  .command('users:token')
  .description('create a user token and print it once: how a person invited by email gets their first token')
  .option('--email <email>', 'the user with this email address')
  .option('--username <name>', 'the user with this username')
  .option('--description <text>', 'what the token is for')
  .action(async (options: { email?: string; username?: string; description?: string }) => {
    if ([options.email, options.username].filter(Boolean).length !== 1)
      throw new StartupError('Give exactly one of --email or --username.');
    await withRuntime(async ({ orm, secrets }) => {
      const em = orm.em.fork();
      const user = options.email ? await findUserByEmail(em, options.email) : await em.findOne(User, { username: options.username ?? '' });
      if (!user)
        throw new StartupError(
          `No user with ${options.email ? `the email address ${options.email}` : `the username ${options.username}`}.`,
        );
      const { secret } = await issueToken(em, secrets, { kind: 'user', userId: user.id, description: options.description ?? null });
      process.stdout.write(`${secret}\n`);
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
