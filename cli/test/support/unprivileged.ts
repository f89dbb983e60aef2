import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./archive-child.ts', import.meta.url));

export type ChildArchive = { files: number } | { code: number; message: string };

/**
 * The command that runs `node` so that file modes apply to it. Root reads files whatever their mode
 * through two capabilities; a child without them (util-linux's `setpriv`) gets EACCES from mode 000 as
 * anyone else does, and still reads the checkout, wherever it is.
 */
function nodeCommand(): [string, string[]] {
  if (process.getuid?.() !== 0) return [process.execPath, []];
  const without = '-dac_override,-dac_read_search';
  return ['setpriv', [`--bounding-set=${without}`, `--inh-caps=${without}`, '--', process.execPath]];
}

/** Archives `dir` in a child process that file modes apply to, even when the tests run as root. */
export function archiveUnprivileged(dir: string): Promise<ChildArchive> {
  const [command, prefix] = nodeCommand();
  return new Promise((resolve, reject) => {
    execFile(command, [...prefix, CHILD, dir], { encoding: 'utf8', timeout: 20_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`archive child failed: ${error.message}\n${stderr}`));
      else resolve(JSON.parse(stdout) as ChildArchive);
    });
  });
}
