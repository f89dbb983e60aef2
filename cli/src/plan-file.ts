/**
 * The files a pipeline hands the CLI: the plan JSON (`terraform show -json tfplan`), read in whatever
 * encoding a shell wrote it, and the binary plan file (`terraform plan -out tfplan`), known by its SHA-256.
 */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { CliError } from './exit-codes.ts';

export const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** A hash as the log shows it: enough to compare by eye, with the full one in --output json. */
export const shortHash = (hash: string | null | undefined): string => (hash ? hash.slice(0, 12) : 'unknown');

export interface PlanJson {
  /** UTF-8, as the service takes it. */
  bytes: Buffer;
  sha256: string;
  /** The encoding found where it was not plain UTF-8, and what was done. */
  note: string | undefined;
}

/** The encodings shells write text in besides UTF-8: PowerShell 5's `>` writes UTF-16LE with a byte-order mark. */
export function decodePlanText(raw: Buffer): { text: string; encoding: string | undefined } {
  if (raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf)
    return { text: raw.subarray(3).toString('utf8'), encoding: 'UTF-8 with a byte-order mark' };
  if (raw[0] === 0xff && raw[1] === 0xfe) return { text: new TextDecoder('utf-16le').decode(raw.subarray(2)), encoding: 'UTF-16LE' };
  if (raw[0] === 0xfe && raw[1] === 0xff) return { text: new TextDecoder('utf-16be').decode(raw.subarray(2)), encoding: 'UTF-16BE' };
  // Without a byte-order mark, JSON's first character is ASCII: a NUL beside it gives UTF-16 away.
  if (raw.length >= 2 && raw[0] !== 0 && raw[1] === 0) return { text: new TextDecoder('utf-16le').decode(raw), encoding: 'UTF-16LE' };
  if (raw.length >= 2 && raw[0] === 0 && raw[1] !== 0) return { text: new TextDecoder('utf-16be').decode(raw), encoding: 'UTF-16BE' };
  return { text: raw.toString('utf8'), encoding: undefined };
}

const PLAN_MEMBERS = ['planned_values', 'resource_changes', 'output_changes', 'configuration', 'prior_state'];
const HINT = 'give the output of `terraform show -json PLANFILE` (the file `terraform plan -out PLANFILE` wrote)';

/**
 * hashicorp/setup-terraform's wrapper (on unless `terraform_wrapper: false`) writes a `[command]…` line
 * before what a redirected `terraform show -json` prints, and `::set-output` lines after it.
 */
export const wrappedByActions = (text: string): boolean => text.startsWith('[command]');
export const WRAPPER_HINT =
  "it holds the output of hashicorp/setup-terraform's wrapper (a [command] line before the JSON): set `terraform_wrapper: false` on the setup-terraform step";

async function readBytes(file: string, what: string): Promise<Buffer> {
  try {
    if (!(await stat(file)).isFile()) throw new Error('not a file');
    return await readFile(file);
  } catch {
    throw new CliError('usage', `cannot read the ${what} ${file}`);
  }
}

/** Reads and checks the plan JSON before anything is sent: a file that is not a plan is a usage error (exit 2). */
export async function readPlanJson(file: string): Promise<PlanJson> {
  const raw = await readBytes(file, 'plan file');
  const { text, encoding } = decodePlanText(raw);
  let plan: unknown;
  try {
    plan = JSON.parse(text);
  } catch {
    const binary = raw.subarray(0, 2).toString('latin1') === 'PK';
    if (binary) throw new CliError('usage', `${file} is a binary plan file (terraform plan -out), not its JSON: ${HINT}`);
    if (wrappedByActions(text)) throw new CliError('usage', `${file} is not JSON: ${WRAPPER_HINT}, and ${HINT}`);
    throw new CliError('usage', `${file} is not JSON${encoding ? ` (read as ${encoding})` : ''}: ${HINT}`);
  }
  if (typeof plan !== 'object' || plan === null || Array.isArray(plan) || !('format_version' in plan)) {
    throw new CliError('usage', `${file} is not a Terraform plan (no format_version): ${HINT}`);
  }
  if (!PLAN_MEMBERS.some((member) => member in plan)) {
    const state = 'values' in plan || 'terraform_version' in plan;
    throw new CliError(
      'usage',
      state
        ? `${file} is a Terraform state, not a plan (\`terraform show -json\` without a plan file prints the state): ${HINT}`
        : `${file} is not a Terraform plan (none of ${PLAN_MEMBERS.slice(0, 4).join(', ')}): ${HINT}`,
    );
  }
  const bytes = encoding ? Buffer.from(text, 'utf8') : raw;
  const note = encoding
    ? `${file} is ${encoding}${encoding.startsWith('UTF-16') ? " (PowerShell's `>` writes it)" : ''}: sent as UTF-8`
    : undefined;
  return { bytes, sha256: sha256(bytes), note };
}

/** The binary plan file's SHA-256: the same file must reach `terraform apply`. */
export async function planFileHash(file: string): Promise<string> {
  return sha256(await readBytes(file, 'plan file (--plan-file)'));
}

/** Two JSON values equal whatever their key order and spacing: how a plan is compared where the service keeps no hash of it. */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonical(item)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
