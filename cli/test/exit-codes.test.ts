import { describe, expect, it } from '@jest/globals';
import { describeErrors } from '../src/client.ts';
import { CliError, EXIT, exitKindForStatus } from '../src/exit-codes.ts';

describe('exit codes', () => {
  it('are distinct, and documented numbers do not move', () => {
    expect(EXIT).toEqual({ ok: 0, blocked: 1, usage: 2, auth: 3, network: 4, refused: 5, stopped: 6 });
    expect(new Set(Object.values(EXIT)).size).toBe(Object.keys(EXIT).length);
  });

  it.each([
    [401, 'auth', 3],
    [403, 'refused', 5],
    [404, 'refused', 5],
    [409, 'refused', 5],
    [413, 'refused', 5],
    [422, 'refused', 5],
    [429, 'network', 4],
    [500, 'network', 4],
    [502, 'network', 4],
    [503, 'network', 4],
  ] as const)('HTTP %i is %s (exit %i)', (status, kind, code) => {
    expect(exitKindForStatus(status)).toBe(kind);
    expect(new CliError(exitKindForStatus(status), 'x').code).toBe(code);
  });

  it.each([
    [
      409,
      '{"errors":[{"status":"409","title":"transition not allowed","detail":"The run is applied."}]}',
      'transition not allowed: The run is applied.',
    ],
    [
      422,
      '{"errors":[{"status":"422","title":"invalid attribute","detail":"must be a plan","source":{"pointer":"/format_version"}}]}',
      'invalid attribute: must be a plan (at /format_version)',
    ],
    [404, '{"errors":[{"status":"404","title":"not found"}]}', 'not found'],
    [502, '<html>Bad Gateway</html>', 'HTTP 502'],
  ])('HTTP %i errors read as one line', (status, body, line) => {
    expect(describeErrors(status, body)).toBe(line);
  });
});
