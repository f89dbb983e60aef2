import { parseArgs } from 'node:util';
import { CliError } from './exit-codes.ts';

export const COMMANDS = ['start', 'plan', 'apply', 'applied', 'watch'] as const;
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
  /** `plan`: the file `terraform show -json` wrote. */
  planJson: string | undefined;
  /** `plan` and `applied`: Terraform failed with this message. */
  errored: string | undefined;
  /** `apply`: the confirmation's comment. */
  comment: string | undefined;
  output: 'text' | 'json';
  summary: string | undefined;
  pollIntervalMs: number;
  timeoutMs: number;
  /** Keep waiting while a failed mandatory stage waits for someone to override it. */
  waitForOverride: boolean;
  /** The service's base URL, without `/api/v2`. */
  address: string;
  token: string;
}

export type Parsed = { kind: 'help'; text: string } | { kind: 'run'; options: Options };

export const USAGE = `Usage: runtasks run <command> [options]

Commands (the five steps of a pipeline, in order, and watch):
  start   --workspace ORG/NAME [--config-dir DIR] [--message M] [--plan-only]
          upload DIR (default .) as a configuration version, create the run, wait for pre_plan
  plan    RUN --plan-json FILE | --errored MESSAGE
          report \`terraform show -json\`'s output (or that the plan failed), wait for post_plan
  apply   RUN [--comment TEXT]
          confirm the run, wait for pre_apply
  applied RUN [--errored MESSAGE]
          report that the apply finished (or failed), wait for post_apply
  watch   RUN
          follow the run to its end

Options:
  --output text|json      text (default): live on a terminal, plain lines in CI; json: one JSON document on stdout
  --summary FILE          append a Markdown table of the task results (e.g. "$GITHUB_STEP_SUMMARY")
  --poll-interval SECONDS how often to ask the service (default 2)
  --timeout SECONDS       give up waiting after this long (default 3600), exit 6
  --no-wait-override      exit 1 at once when a failed mandatory stage waits for an override
  --address URL           the service (default RUNTASKS_ADDRESS, else TFE_ADDRESS)
  -h, --help

The token comes from RUNTASKS_TOKEN, else TFE_TOKEN.
Exit codes: 0 go on, 1 blocked by a mandatory task, 2 usage, 3 authentication,
4 network or service error, 5 refused by the service, 6 run stopped otherwise or --timeout.
`;

const RUN_ID = /^run-[A-Za-z0-9]{1,64}$/;
const NAME = /^[A-Za-z0-9_-]{1,90}$/;

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
function addressOf(raw: string | undefined): string {
  if (!raw) throw new CliError('usage', 'no service address: set RUNTASKS_ADDRESS (or TFE_ADDRESS), or pass --address');
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

const OPTIONS = {
  workspace: { type: 'string' },
  'config-dir': { type: 'string' },
  message: { type: 'string' },
  'plan-only': { type: 'boolean' },
  'plan-json': { type: 'string' },
  errored: { type: 'string' },
  comment: { type: 'string' },
  output: { type: 'string' },
  summary: { type: 'string' },
  'poll-interval': { type: 'string' },
  timeout: { type: 'string' },
  'no-wait-override': { type: 'boolean' },
  address: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Which options each command takes besides the common ones. */
const OWN: Record<Command, readonly string[]> = {
  start: ['workspace', 'config-dir', 'message', 'plan-only'],
  plan: ['plan-json', 'errored'],
  apply: ['comment'],
  applied: ['errored'],
  watch: [],
};
const COMMON = ['output', 'summary', 'poll-interval', 'timeout', 'no-wait-override', 'address', 'help'];

/** Parses `runtasks …` (argv without node and the script) with the environment; throws a usage CliError. */
export function parseCli(argv: readonly string[], env: Record<string, string | undefined>): Parsed {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw new CliError('usage', `${(error as Error).message.split('\n')[0]?.split('. To specify')[0]} (runtasks --help)`);
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) return { kind: 'help', text: USAGE };
  const [group, command, ...rest] = positionals;
  if (group !== 'run') throw new CliError('usage', `unknown command "${group}": runtasks run <start|plan|apply|applied|watch>`);
  if (!(COMMANDS as readonly string[]).includes(command ?? '')) {
    throw new CliError('usage', `unknown command "run ${command ?? ''}": use one of ${COMMANDS.join(', ')}`);
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
  if (values.errored !== undefined && values.errored.trim() === '') throw new CliError('usage', '--errored needs a message');
  const output = values.output ?? 'text';
  if (output !== 'text' && output !== 'json') throw new CliError('usage', `--output must be text or json, not "${output}"`);
  // A secret pasted with its line break is common: the token is what is left once trimmed.
  const token = (env['RUNTASKS_TOKEN'] || env['TFE_TOKEN'])?.trim();
  if (!token) throw new CliError('usage', 'no token: set RUNTASKS_TOKEN (or TFE_TOKEN)');
  if (!/^[\x21-\x7e]+$/.test(token))
    throw new CliError('usage', 'the token holds spaces or characters no token has: check RUNTASKS_TOKEN (or TFE_TOKEN)');
  return {
    kind: 'run',
    options: {
      command: cmd,
      run,
      workspace,
      configDir: values['config-dir'] ?? '.',
      message: values.message,
      planOnly: values['plan-only'] ?? false,
      planJson: values['plan-json'],
      errored: values.errored,
      comment: values.comment,
      output,
      summary: values.summary,
      pollIntervalMs: seconds('poll-interval', values['poll-interval'], 2, 0.1, 60),
      timeoutMs: seconds('timeout', values.timeout, 3600, 1, 7 * 24 * 3600),
      waitForOverride: !values['no-wait-override'],
      address: addressOf(values.address ?? (env['RUNTASKS_ADDRESS'] || env['TFE_ADDRESS'])),
      token,
    },
  };
}
