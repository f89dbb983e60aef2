import { ID_TOKEN_VARIABLE, identitySource, type IdentitySource } from './ci-identity.ts';
import { parseArgs } from 'node:util';
import { CliError } from './exit-codes.ts';
import { pipelineAttemptKey } from './idempotency.ts';

export const COMMANDS = ['start', 'plan', 'apply', 'applied', 'watch', 'cancel', 'discard'] as const;
export type Command = (typeof COMMANDS)[number];

export interface Options {
  command: Command;
  /** The run's id (every command but `start`). */
  run: string | undefined;
  /** `start`: the workspace as organization and name. */
  workspace: { organization: string; name: string } | undefined;
  configDir: string;
  message: string | undefined;
  planOnly: boolean;
  /** `start`: the key that makes a retried start find its run, and where it came from (`--idempotency-key`, `GITHUB_RUN_ID`, …). */
  idempotency: { key: string; source: string } | undefined;
  /** `plan`: the file `terraform show -json` wrote. */
  planJson: string | undefined;
  /** `plan`, `apply`, `applied`: the binary plan file (`terraform plan -out`), whose SHA-256 ties the apply to the checked plan. */
  planFile: string | undefined;
  /** `plan` and `applied`: Terraform failed with this message. */
  errored: string | undefined;
  /** `apply`, `cancel`, `discard`: the action's comment. */
  comment: string | undefined;
  output: 'text' | 'json';
  summary: string | undefined;
  pollIntervalMs: number;
  timeoutMs: number;
  /** Keep waiting while a failed mandatory stage waits for someone to override it. */
  waitForOverride: boolean;
  /** The service's base URL, without `/api/v2`. */
  address: string;
  /** Unset: exchanged for the CI's identity token (`identity`) before the first request. */
  token: string | undefined;
  identity: IdentitySource | undefined;
  /** The address or the token came from TFE_ADDRESS / TFE_TOKEN: the service must prove it is this service before the token is sent. */
  fromTfeEnv: boolean;
  /** GitHub Actions: annotations, and the job summary written without `--summary`. */
  github: { stepSummary: string | undefined } | undefined;
}

export type Parsed =
  | { kind: 'help'; text: string }
  | { kind: 'version'; address: string | undefined; fromTfeEnv: boolean; output: 'text' | 'json' }
  | { kind: 'run'; options: Options };

export const USAGE = `Usage: runtasks run <command> [options]

Commands (the five steps of a pipeline, in order, then the others):
  start   --workspace ORG/NAME [--config-dir DIR] [--message M] [--plan-only] [--idempotency-key KEY]
          upload DIR (default .) as a configuration version, create the run, wait for pre_plan
  plan    RUN --plan-json FILE [--plan-file TFPLAN] | --errored MESSAGE
          report \`terraform show -json\`'s output (or that the plan failed), wait for post_plan
  apply   RUN [--plan-file TFPLAN] [--comment TEXT]
          confirm the run (after checking TFPLAN is the plan reported), wait for pre_apply
  applied RUN [--plan-file TFPLAN] [--errored MESSAGE]
          report that the apply finished (or failed), wait for post_apply
  watch   RUN
          follow the run to its end
  cancel  RUN [--comment TEXT]
          stop the run (discard it where it waits for a confirmation or a decision); exit 0 once it has ended
  discard RUN [--comment TEXT]
          discard a run that waits for a confirmation or an override

Options:
  --output text|json      text (default): live on a terminal, plain lines in CI; json: one JSON document on stdout
  --summary FILE          append a Markdown table of the task results (on GitHub Actions: $GITHUB_STEP_SUMMARY by default)
  --poll-interval SECONDS how often to ask the service (default 2)
  --timeout SECONDS       give up waiting after this long (default 3600), exit 6; the service is retried until then
  --no-wait-override      exit 1 at once when a failed mandatory stage waits for an override
  --address URL           the service (default RUNTASKS_ADDRESS)
  --allow-tfe-env         read TFE_ADDRESS and TFE_TOKEN where RUNTASKS_* are unset (only for this service, never HCP)
  --version               print the CLI's version and the service's
  -h, --help

The token comes from RUNTASKS_TOKEN; without it, the CI's identity token (RUNTASKS_ID_TOKEN, or GitHub's) is exchanged for one. Exit codes: 0 go on, 1 blocked by a mandatory task, 2 usage,
3 authentication, 4 network or service error, 5 refused by the service, 6 run stopped otherwise or --timeout.
`;

const RUN_ID = /^run-[A-Za-z0-9]{1,64}$/;
const NAME = /^[A-Za-z0-9_-]{1,90}$/;
/** What an Idempotency-Key header may hold: printable ASCII without spaces, not too long for a header. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** Seconds from a flag, within bounds; the CLI's own numbers, so a typo is a usage error, not a busy loop. */
function seconds(flag: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback * 1000;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min || value > max) {
    throw new CliError('usage', `--${flag} must be a number of seconds between ${min} and ${max}, not "${raw}"`);
  }
  return Math.round(value * 1000);
}

function workspaceOf(raw: string | undefined): Options['workspace'] {
  if (raw === undefined) return undefined;
  const [organization, name, ...rest] = raw.split('/');
  if (!organization || !name || rest.length > 0 || !NAME.test(organization) || !NAME.test(name)) {
    throw new CliError('usage', `--workspace must be ORGANIZATION/NAME, not "${raw}"`);
  }
  return { organization, name };
}

/** The address as given, or a usage error; `https://host/api/v2` and `https://host` both work. */
function addressOf(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError('usage', `the service address "${raw}" is not a URL (e.g. https://runtasks.example.com)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CliError('usage', `the service address must be http(s), not "${raw}"`);
  return `${url.origin}${url.pathname.replace(/\/+$/, '').replace(/\/api\/v2$/, '')}`;
}

type Env = Record<string, string | undefined>;

/**
 * A setting from RUNTASKS_*, or from its TFE_* twin only with --allow-tfe-env: a runner set up for HCP
 * Terraform has TFE_* too, and a CLI that read them unasked could create runs in HCP.
 */
function setting(env: Env, name: 'ADDRESS' | 'TOKEN', allowTfe: boolean): { value: string | undefined; fromTfe: boolean } {
  const own = env[`RUNTASKS_${name}`];
  if (own) return { value: own, fromTfe: false };
  const tfe = env[`TFE_${name}`];
  return allowTfe && tfe ? { value: tfe, fromTfe: true } : { value: undefined, fromTfe: false };
}

function missing(env: Env, name: 'ADDRESS' | 'TOKEN', allowTfe: boolean, hint: string): CliError {
  const tfeSet = !allowTfe && env[`TFE_${name}`];
  return new CliError(
    'usage',
    `no ${name === 'ADDRESS' ? 'service address' : 'token'}: set RUNTASKS_${name}${hint}` +
      (tfeSet ? ` (TFE_${name} is set, but it is read only with --allow-tfe-env)` : ''),
  );
}

const OPTIONS = {
  workspace: { type: 'string' },
  'config-dir': { type: 'string' },
  message: { type: 'string' },
  'plan-only': { type: 'boolean' },
  'idempotency-key': { type: 'string' },
  'plan-json': { type: 'string' },
  'plan-file': { type: 'string' },
  errored: { type: 'string' },
  comment: { type: 'string' },
  output: { type: 'string' },
  summary: { type: 'string' },
  'poll-interval': { type: 'string' },
  timeout: { type: 'string' },
  'no-wait-override': { type: 'boolean' },
  address: { type: 'string' },
  'allow-tfe-env': { type: 'boolean' },
  version: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Which options each command takes besides the common ones. */
const OWN: Record<Command, readonly string[]> = {
  start: ['workspace', 'config-dir', 'message', 'plan-only', 'idempotency-key'],
  plan: ['plan-json', 'plan-file', 'errored'],
  apply: ['plan-file', 'comment'],
  applied: ['plan-file', 'errored'],
  watch: [],
  cancel: ['comment'],
  discard: ['comment'],
};
const COMMON = ['output', 'summary', 'poll-interval', 'timeout', 'no-wait-override', 'address', 'allow-tfe-env', 'help', 'version'];
const LIST = COMMANDS.join(', ');

/** `--output json` as given, even where the rest of the arguments do not parse: usage errors are JSON documents too. */
export function wantsJson(argv: readonly string[]): boolean {
  return argv.some((arg, index) => arg === '--output=json' || (arg === '--output' && argv[index + 1] === 'json'));
}

/** Parses `runtasks …` (argv without node and the script) with the environment; throws a usage CliError. */
export function parseCli(argv: readonly string[], env: Env): Parsed {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw new CliError('usage', `${(error as Error).message.split('\n')[0]?.split('. To specify')[0]} (runtasks --help)`);
  }
  const { values, positionals } = parsed;
  if (values.help) return { kind: 'help', text: USAGE };
  const output = values.output ?? 'text';
  if (output !== 'text' && output !== 'json') throw new CliError('usage', `--output must be text or json, not "${output}"`);
  const allowTfe = values['allow-tfe-env'] ?? false;
  const rawAddress = values.address ? { value: values.address, fromTfe: false } : setting(env, 'ADDRESS', allowTfe);
  if (values.version) {
    if (positionals.length > 0) throw new CliError('usage', '--version takes no command (runtasks --version)');
    return {
      kind: 'version',
      address: rawAddress.value ? addressOf(rawAddress.value) : undefined,
      fromTfeEnv: rawAddress.fromTfe,
      output,
    };
  }
  const [group, command, ...rest] = positionals;
  if (group === undefined) throw new CliError('usage', `no command given: runtasks run <${COMMANDS.join('|')}> (runtasks --help)`, true);
  if (group !== 'run') throw new CliError('usage', `unknown command "${group}": runtasks run <${COMMANDS.join('|')}>`, true);
  if (command === undefined) throw new CliError('usage', `"run" needs a command: one of ${LIST}`, true);
  if (!(COMMANDS as readonly string[]).includes(command)) {
    throw new CliError('usage', `unknown command "run ${command}": use one of ${LIST}`, true);
  }
  const cmd = command as Command;
  for (const key of Object.keys(values)) {
    if (!COMMON.includes(key) && !OWN[cmd].includes(key)) throw new CliError('usage', `run ${cmd} does not take --${key}`);
  }
  const run = cmd === 'start' ? undefined : rest.shift();
  if (rest.length > 0) throw new CliError('usage', `unexpected argument "${rest[0]}"`);
  if (cmd !== 'start' && (run === undefined || !RUN_ID.test(run))) {
    throw new CliError('usage', run === undefined ? `run ${cmd} needs the run's id (run-…)` : `"${run}" is not a run id (run-…)`);
  }
  const workspace = workspaceOf(values.workspace);
  if (cmd === 'start' && !workspace) throw new CliError('usage', 'run start needs --workspace ORGANIZATION/NAME');
  if (cmd === 'plan' && (values['plan-json'] === undefined) === (values.errored === undefined)) {
    throw new CliError('usage', 'run plan needs either --plan-json FILE or --errored MESSAGE');
  }
  if (cmd === 'plan' && values.errored !== undefined && values['plan-file'] !== undefined) {
    throw new CliError('usage', 'run plan takes --plan-file with --plan-json, not with --errored');
  }
  if (values.errored !== undefined && values.errored.trim() === '') throw new CliError('usage', '--errored needs a message');
  const givenKey = values['idempotency-key'];
  if (givenKey !== undefined && !IDEMPOTENCY_KEY.test(givenKey)) {
    throw new CliError('usage', '--idempotency-key must be 1 to 255 printable characters without spaces');
  }
  if (!rawAddress.value) throw missing(env, 'ADDRESS', allowTfe, ', or pass --address');
  const address = addressOf(rawAddress.value);
  const rawToken = setting(env, 'TOKEN', allowTfe);
  // A secret pasted with its line break is common: the token is what is left once trimmed.
  const token = rawToken.value?.trim();
  // Never to an address from TFE_ADDRESS: that may be HCP Terraform, which must not see the identity token.
  const identity = token || rawAddress.fromTfe ? undefined : identitySource(env);
  if (!token && !identity)
    throw missing(env, 'TOKEN', allowTfe, ` (or let the CI offer an identity token: ${ID_TOKEN_VARIABLE}, or GitHub's id-token: write)`);
  if (token && !/^[\x21-\x7e]+$/.test(token)) {
    throw new CliError(
      'usage',
      `the token holds spaces or characters no token has: check ${rawToken.fromTfe ? 'TFE_TOKEN' : 'RUNTASKS_TOKEN'}`,
    );
  }
  const idempotency =
    cmd !== 'start' || !workspace
      ? undefined
      : givenKey !== undefined
        ? { key: givenKey, source: '--idempotency-key' }
        : pipelineAttemptKey(env, `${workspace.organization}/${workspace.name}`);
  return {
    kind: 'run',
    options: {
      command: cmd,
      run,
      workspace,
      configDir: values['config-dir'] ?? '.',
      message: values.message,
      planOnly: values['plan-only'] ?? false,
      idempotency,
      planJson: values['plan-json'],
      planFile: values['plan-file'],
      errored: values.errored,
      comment: values.comment,
      output,
      summary: values.summary,
      pollIntervalMs: seconds('poll-interval', values['poll-interval'], 2, 0.1, 60),
      timeoutMs: seconds('timeout', values.timeout, 3600, 1, 7 * 24 * 3600),
      waitForOverride: !values['no-wait-override'],
      address,
      token,
      identity,
      fromTfeEnv: rawAddress.fromTfe || rawToken.fromTfe,
      github: env['GITHUB_ACTIONS'] === 'true' ? { stepSummary: env['GITHUB_STEP_SUMMARY'] || undefined } : undefined,
    },
  };
}
