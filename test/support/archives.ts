import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A real .tar.gz of a one-file Terraform configuration (`main.tf`), made by the system's tar, as `terraform` uploads it. */
export function configurationArchive(mainTf = 'terraform {}\n'): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'runtasks-configuration-'));
  try {
    writeFileSync(join(dir, 'main.tf'), mainTf);
    return execFileSync('tar', ['-czf', '-', '-C', dir, 'main.tf']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
