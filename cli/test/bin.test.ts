import { describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from './support/cli-harness.ts';

describe('the runtasks bin', () => {
  it('runs the CLI from its sources, also through a symlink as the CI examples install it', () => {
    expect(execFileSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' })).toMatch(/^Usage: runtasks run <command>/);
    const dir = mkdtempSync(join(tmpdir(), 'runtasks-bin-'));
    try {
      symlinkSync(BIN, join(dir, 'runtasks'));
      const result = spawnSync(process.execPath, [join(dir, 'runtasks'), 'run', 'watch', 'run-1'], { encoding: 'utf8', env: {} });
      expect({ status: result.status, stderr: result.stderr }).toEqual({
        status: 2,
        stderr: 'runtasks: no service address: set RUNTASKS_ADDRESS, or pass --address\n',
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
