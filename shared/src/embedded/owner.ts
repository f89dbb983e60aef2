import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { commandLine, EmbeddedError, isRunning, readPid } from './processes.ts';

/**
 * One process at a time owns a data directory's embedded services. The owner's pid is kept in
 * `embedded.pid`: a live owner means a second start would stop its databases under it, so it is refused;
 * a dead one (a crash, SIGKILL) means what runs there is an orphan the new owner may stop.
 */
const OWNER_FILE = 'embedded.pid';

export function claimDataDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, OWNER_FILE);
  const owner = readPid(file);
  // A pid reused by an unrelated process after a crash is not an owner: only a Node process can be one.
  if (owner !== undefined && owner !== process.pid && isRunning(owner) && /\bnode\b/.test(commandLine(owner))) {
    throw new EmbeddedError(
      `Another process (pid ${owner}) runs the embedded PostgreSQL/Redis in ${dataDir}: stop it first, or give this one its own RUNTASKS_DATA_DIR.`,
    );
  }
  writeFileSync(file, `${process.pid}\n`);
  return () => {
    if (existsSync(file) && readFileSync(file, 'utf8').trim() === String(process.pid)) rmSync(file, { force: true });
  };
}
