/**
 * Counts every `*.json` plan (the output of `terraform show -json <planfile>`) in a directory as the
 * service counts a reported plan, and prints one line per file: its format_version, additions, changes,
 * destructions, imports, and whether it has changes (or why it is no plan). For checking real plans out
 * of tree against what the service would report, without copying them into the repository:
 *
 *     node scripts/count-plans.ts DIR
 *
 * Exits 1 where a file is not a plan the service would take, 2 on a usage error.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readPlan, type PlanSummary } from '@runtasks/shared/domain';
import { WRAPPER_HINT, wrappedByActions } from '../cli/src/plan-file.ts';

export type PlanCount =
  | { file: string; ok: true; format: string; summary: PlanSummary; errored: boolean }
  | { file: string; ok: false; format: string; problem: string };

/** One plan's counts from its bytes, as the API reads a reported plan: UTF-8 JSON, then `readPlan`. */
export function countPlan(file: string, text: string): PlanCount {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    return { file, ok: false, format: '-', problem: `not valid JSON${wrappedByActions(text) ? `: ${WRAPPER_HINT}` : ''}` };
  }
  const version = (document as { format_version?: unknown } | null)?.format_version;
  const format = typeof version === 'string' ? version : '-';
  const reading = readPlan(document);
  if (!reading.ok) return { file, ok: false, format, problem: `${reading.pointer || '/'}: ${reading.detail}` };
  return { file, ok: true, format, summary: reading.summary, errored: reading.errored };
}

/** The counts of every `*.json` file directly in `dir`, by name. */
export function countPlans(dir: string): PlanCount[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => countPlan(name, readFileSync(join(dir, name), 'utf8')));
}

/** The table the command prints: a header, then one tab-separated line per file. */
export function planTable(counts: readonly PlanCount[]): string[] {
  const lines = ['file\tformat\tadditions\tchanges\tdestructions\timports\thas-changes'];
  for (const count of counts) {
    if (!count.ok) {
      lines.push(`${count.file}\t${count.format}\tnot a plan: ${count.problem}`);
      continue;
    }
    const { resourceAdditions, resourceChanges, resourceDestructions, resourceImports, hasChanges } = count.summary;
    const verdict = `${hasChanges}${count.errored ? ' (errored)' : ''}`;
    lines.push([count.file, count.format, resourceAdditions, resourceChanges, resourceDestructions, resourceImports, verdict].join('\t'));
  }
  return lines;
}

if (import.meta.main) {
  const dir = process.argv[2];
  if (!dir || process.argv.length > 3) {
    process.stderr.write('usage: node scripts/count-plans.ts DIR\n');
    process.exit(2);
  }
  const counts = countPlans(dir);
  process.stdout.write(`${planTable(counts).join('\n')}\n`);
  const refused = counts.filter((count) => !count.ok).length;
  process.stdout.write(`${counts.length} files, ${counts.length - refused} plans${refused ? `, ${refused} not plans` : ''}\n`);
  process.exitCode = refused ? 1 : 0;
}
