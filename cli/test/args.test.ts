import { describe, expect, it } from '@jest/globals';
import { parseCli, wantsJson, type Options } from '../src/args.ts';
import { CliError, EXIT } from '../src/exit-codes.ts';

const ENV = { RUNTASKS_ADDRESS: 'https://runtasks.example.com', RUNTASKS_TOKEN: 'secret' };

function options(argv: string[], env: Record<string, string | undefined> = ENV): Options {
  const parsed = parseCli(argv, env);
  if (parsed.kind !== 'run') throw new Error('expected a command');
  return parsed.options;
}

function usageError(argv: string[], env: Record<string, string | undefined> = ENV): string {
  try {
    parseCli(argv, env);
  } catch (error) {
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).code).toBe(EXIT.usage);
    return (error as CliError).message;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
}

describe('runtasks arguments', () => {
  it.each([
    [
      ['run', 'start', '--workspace', 'acme/network'],
      { command: 'start', workspace: { organization: 'acme', name: 'network' }, configDir: '.', planOnly: false },
    ],
    [
      ['run', 'start', '--workspace', 'acme/network', '--config-dir', 'infra', '--message', 'ci #12', '--plan-only'],
      { configDir: 'infra', message: 'ci #12', planOnly: true },
    ],
    [
      ['run', 'plan', 'run-abc123', '--plan-json', 'plan.json'],
      { command: 'plan', run: 'run-abc123', planJson: 'plan.json', errored: undefined },
    ],
    [['run', 'plan', 'run-abc123', '--errored', 'terraform plan failed'], { planJson: undefined, errored: 'terraform plan failed' }],
    [['run', 'apply', 'run-abc123', '--comment', 'ship it'], { command: 'apply', comment: 'ship it' }],
    [['run', 'applied', 'run-abc123'], { command: 'applied', errored: undefined }],
    [['run', 'applied', 'run-abc123', '--errored', 'boom'], { errored: 'boom' }],
    [['run', 'watch', 'run-abc123'], { command: 'watch', output: 'text', summary: undefined, waitForOverride: true }],
    [
      [
        'run',
        'watch',
        'run-abc123',
        '--output',
        'json',
        '--summary',
        's.md',
        '--poll-interval',
        '0.5',
        '--timeout',
        '90',
        '--no-wait-override',
      ],
      { output: 'json', summary: 's.md', pollIntervalMs: 500, timeoutMs: 90_000, waitForOverride: false },
    ],
    [
      ['run', 'watch', 'run-abc123'],
      { pollIntervalMs: 2000, timeoutMs: 3_600_000, address: 'https://runtasks.example.com', token: 'secret' },
    ],
  ])('%j', (argv, expected) => {
    expect(options(argv)).toMatchObject(expected);
  });

  it.each([
    [{ TFE_ADDRESS: 'https://tfe.example.com/', TFE_TOKEN: 't' }, 'https://tfe.example.com', 't'],
    [
      { RUNTASKS_ADDRESS: 'http://127.0.0.1:3000/api/v2', TFE_ADDRESS: 'https://tfe.example.com', RUNTASKS_TOKEN: 'r', TFE_TOKEN: 't' },
      'http://127.0.0.1:3000',
      'r',
    ],
    [
      { RUNTASKS_ADDRESS: '', TFE_ADDRESS: 'https://proxy.example.com/runtasks/', TFE_TOKEN: 't' },
      'https://proxy.example.com/runtasks',
      't',
    ],
  ])('with --allow-tfe-env, takes the address and token from RUNTASKS_* before TFE_* (%j)', (env, address, token) => {
    expect(options(['run', 'watch', 'run-x1', '--allow-tfe-env'], env)).toMatchObject({ address, token });
  });

  it('reads TFE_* only with --allow-tfe-env, and marks what came from there for the service to vouch for', () => {
    const tfe = { TFE_ADDRESS: 'https://tfe.example.com', TFE_TOKEN: 't' };
    expect(usageError(['run', 'watch', 'run-x1'], tfe)).toBe(
      'no service address: set RUNTASKS_ADDRESS, or pass --address (TFE_ADDRESS is set, but it is read only with --allow-tfe-env)',
    );
    expect(usageError(['run', 'watch', 'run-x1'], { ...tfe, RUNTASKS_ADDRESS: 'http://x' })).toBe(
      "no token: set RUNTASKS_TOKEN (or let the CI offer an identity token: RUNTASKS_ID_TOKEN, or GitHub's id-token: write) (TFE_TOKEN is set, but it is read only with --allow-tfe-env)",
    );
    expect(options(['run', 'watch', 'run-x1', '--allow-tfe-env'], tfe)).toMatchObject({ fromTfeEnv: true });
    expect(options(['run', 'watch', 'run-x1', '--allow-tfe-env'], { ...tfe, ...ENV })).toMatchObject({ fromTfeEnv: false });
  });

  it('takes an idempotency key for run start from --idempotency-key, else from the CI attempt', () => {
    const start = ['run', 'start', '--workspace', 'acme/network'];
    expect(options([...start, '--idempotency-key', 'deploy-42'])).toMatchObject({
      idempotency: { key: 'deploy-42', source: '--idempotency-key' },
    });
    expect(options(start).idempotency).toBeUndefined();
    const github = {
      ...ENV,
      GITHUB_ACTIONS: 'true',
      GITHUB_REPOSITORY: 'acme/infra',
      GITHUB_RUN_ID: '7',
      GITHUB_RUN_ATTEMPT: '1',
      GITHUB_JOB: 'tf',
    };
    expect(options(start, github)).toMatchObject({
      idempotency: { key: expect.stringMatching(/^runtasks-[0-9a-f]{48}$/), source: expect.stringContaining('GITHUB_RUN_ID=7') },
      github: { stepSummary: undefined },
    });
    expect(options(['run', 'watch', 'run-1'], github).idempotency).toBeUndefined();
  });

  it('takes --plan-file where a plan is reported, confirmed or applied, and cancel/discard with a comment', () => {
    expect(options(['run', 'plan', 'run-1', '--plan-json', 'p.json', '--plan-file', 'tfplan'])).toMatchObject({ planFile: 'tfplan' });
    expect(options(['run', 'apply', 'run-1', '--plan-file', 'tfplan'])).toMatchObject({ command: 'apply', planFile: 'tfplan' });
    expect(options(['run', 'applied', 'run-1', '--plan-file', 'tfplan'])).toMatchObject({ command: 'applied', planFile: 'tfplan' });
    expect(options(['run', 'cancel', 'run-1', '--comment', 'job cancelled'])).toMatchObject({
      command: 'cancel',
      comment: 'job cancelled',
    });
    expect(options(['run', 'discard', 'run-1'])).toMatchObject({ command: 'discard', run: 'run-1' });
  });

  it('--version needs no token, and an address only to ask the service', () => {
    expect(parseCli(['--version'], {})).toEqual({ kind: 'version', address: undefined, fromTfeEnv: false, output: 'text' });
    expect(parseCli(['--version', '--output', 'json'], ENV)).toEqual({
      kind: 'version',
      address: 'https://runtasks.example.com',
      fromTfeEnv: false,
      output: 'json',
    });
  });

  it.each([
    [['run', 'watch', '--output', 'json', '--bogus'], true],
    [['--output=json'], true],
    [['run', 'watch', '--output', 'text'], false],
  ])('%j asks for JSON even when it is not a valid command line: %s', (argv, json) => {
    expect(wantsJson(argv)).toBe(json);
  });

  it('trims the token, and refuses one that holds what no token has (without showing it)', () => {
    expect(options(['run', 'watch', 'run-x1'], { ...ENV, RUNTASKS_TOKEN: '  abc.def\n' })).toMatchObject({ token: 'abc.def' });
    const message = usageError(['run', 'watch', 'run-x1'], { ...ENV, RUNTASKS_TOKEN: 'abc def' });
    expect(message).toMatch(/the token holds spaces or characters no token has/);
    expect(message).not.toContain('abc');
  });

  it('prefers --address to the environment', () => {
    expect(options(['run', 'watch', 'run-x1', '--address', 'http://localhost:3000'])).toMatchObject({ address: 'http://localhost:3000' });
  });

  it.each([
    [['--help'], 'help'],
    [['run', 'plan', '-h'], 'help'],
  ])('%j prints the usage', (argv) => {
    const parsed = parseCli(argv, {});
    expect(parsed.kind).toBe('help');
    expect(parsed.kind === 'help' && parsed.text).toContain('Exit codes: 0 go on, 1 blocked by a mandatory task');
  });

  it.each([
    [[], /^no command given: runtasks run <start\|plan\|apply\|applied\|watch\|cancel\|discard> \(runtasks --help\)$/],
    [['run'], /^"run" needs a command: one of start, plan, apply, applied, watch, cancel, discard$/],
    [['run', 'plan', 'run-1', '--errored', 'x', '--plan-file', 'f'], /takes --plan-file with --plan-json, not with --errored/],
    [['run', 'start', '--workspace', 'a/b', '--idempotency-key', 'has space'], /--idempotency-key must be 1 to 255 printable/],
    [['run', 'watch', 'run-1', '--plan-file', 'f'], /run watch does not take --plan-file/],
    [['--version', 'run', 'watch'], /--version takes no command/],
    [['plan'], /unknown command "plan"/],
    [['run', 'destroy'], /unknown command "run destroy"/],
    [['run', 'start'], /needs --workspace/],
    [['run', 'start', '--workspace', 'acme'], /ORGANIZATION\/NAME/],
    [['run', 'start', '--workspace', 'acme/a/b'], /ORGANIZATION\/NAME/],
    [['run', 'plan', 'run-1'], /either --plan-json FILE or --errored MESSAGE/],
    [['run', 'plan', 'run-1', '--plan-json', 'p', '--errored', 'x'], /either --plan-json FILE or --errored MESSAGE/],
    [['run', 'plan', 'run-1', '--errored', ' '], /--errored needs a message/],
    [['run', 'plan', '--plan-json', 'p'], /needs the run's id/],
    [['run', 'watch', 'ws-123'], /"ws-123" is not a run id/],
    [['run', 'watch', 'run-1', 'extra'], /unexpected argument "extra"/],
    [['run', 'watch', 'run-1', '--plan-json', 'p'], /run watch does not take --plan-json/],
    [['run', 'apply', 'run-1', '--errored', 'x'], /run apply does not take --errored/],
    [['run', 'watch', 'run-1', '--output', 'yaml'], /--output must be text or json/],
    [['run', 'watch', 'run-1', '--poll-interval', '0'], /--poll-interval must be a number of seconds between 0.1 and 60/],
    [['run', 'watch', 'run-1', '--timeout', 'soon'], /--timeout must be/],
    [['run', 'watch', 'run-1', '--address', 'ftp://x'], /must be http\(s\)/],
    [['run', 'watch', 'run-1', '--address', 'not a url'], /is not a URL/],
    [['run', 'watch', 'run-1', '--bogus'], /^Unknown option '--bogus' \(runtasks --help\)$/],
  ])('%j is a usage error', (argv, message) => {
    expect(usageError(argv)).toMatch(message);
  });

  it('needs an address and a token, and says where they come from', () => {
    expect(usageError(['run', 'watch', 'run-1'], { RUNTASKS_TOKEN: 't' })).toBe(
      'no service address: set RUNTASKS_ADDRESS, or pass --address',
    );
    expect(usageError(['run', 'watch', 'run-1'], { RUNTASKS_ADDRESS: 'http://x' })).toBe(
      "no token: set RUNTASKS_TOKEN (or let the CI offer an identity token: RUNTASKS_ID_TOKEN, or GitHub's id-token: write)",
    );
  });

  it('names no command it does not know, and shows the usage with the error', () => {
    try {
      parseCli(['run'], ENV);
    } catch (error) {
      expect((error as CliError).showUsage).toBe(true);
    }
    expect.assertions(1);
  });
});
