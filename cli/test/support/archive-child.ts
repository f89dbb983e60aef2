/**
 * `archiveDirectory(argv[2])` in a process of its own, for tests that need a user who cannot read what
 * mode 000 forbids (see unprivileged.ts): prints `{ files }` or `{ code, message }` as JSON.
 */
import { archiveDirectory } from '../../src/archive.ts';
import { CliError } from '../../src/exit-codes.ts';

try {
  const { files } = await archiveDirectory(process.argv[2] as string);
  process.stdout.write(JSON.stringify({ files }));
} catch (error) {
  if (!(error instanceof CliError)) throw error;
  process.stdout.write(JSON.stringify({ code: error.code, message: error.message }));
}
