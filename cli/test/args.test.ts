import { describe, expect, it } from '@jest/globals';
import { parseCli, type Options } from '../src/args.ts';
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
  ])('takes the address and token from RUNTASKS_* before TFE_* (%j)', (env, address, token) => {
    expect(options(['run', 'watch', 'run-x1'], env)).toMatchObject({ address, token });
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
    [[], 'help'],
    [['--help'], 'help'],
    [['run', 'plan', '-h'], 'help'],
  ])('%j prints the usage', (argv) => {
    const parsed = parseCli(argv, {});
    expect(parsed.kind).toBe('help');
    expect(parsed.kind === 'help' && parsed.text).toContain('Exit codes: 0 go on, 1 blocked by a mandatory task');
  });

  it.each([
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
    expect(usageError(['run', 'watch', 'run-1'], { RUNTASKS_TOKEN: 't' })).toMatch(/set RUNTASKS_ADDRESS \(or TFE_ADDRESS\)/);
    expect(usageError(['run', 'watch', 'run-1'], { RUNTASKS_ADDRESS: 'http://x' })).toMatch(/set RUNTASKS_TOKEN \(or TFE_TOKEN\)/);
  });
});
