import { afterAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodePlanText, planFileHash, readPlanJson, sameJson, sha256 } from '../src/plan-file.ts';
import { CliError, EXIT } from '../src/exit-codes.ts';
import { PLAN_FIXTURE } from './support/cli-harness.ts';

const dir = mkdtempSync(join(tmpdir(), 'runtasks-plan-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, bytes: Buffer): string => {
  writeFileSync(join(dir, name), bytes);
  return join(dir, name);
};
const plan = readFileSync(PLAN_FIXTURE, 'utf8');
const utf16 = (text: string, bom: boolean, bigEndian = false): Buffer => {
  const le = Buffer.from(text, 'utf16le');
  const bytes = bigEndian ? Buffer.from(le).swap16() : le;
  return Buffer.concat([bom ? Buffer.from(bigEndian ? [0xfe, 0xff] : [0xff, 0xfe]) : Buffer.alloc(0), bytes]);
};

describe('the plan files a pipeline gives', () => {
  it.each([
    ['UTF-8', Buffer.from(plan), undefined],
    ['UTF-8 with a BOM', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(plan)]), 'UTF-8 with a byte-order mark'],
    ["PowerShell's UTF-16LE with a BOM", utf16(plan, true), 'UTF-16LE'],
    ['UTF-16LE without a BOM', utf16(plan, false), 'UTF-16LE'],
    ['UTF-16BE with a BOM', utf16(plan, true, true), 'UTF-16BE'],
    ['UTF-16BE without a BOM', utf16(plan, false, true), 'UTF-16BE'],
  ])('reads %s, names the encoding, and sends the same UTF-8', async (name, bytes, encoding) => {
    expect(decodePlanText(bytes)).toEqual({ text: plan, encoding });
    const read = await readPlanJson(file(`${name}.json`, bytes));
    expect(read.bytes.toString('utf8')).toBe(plan);
    expect(read.sha256).toBe(sha256(Buffer.from(plan)));
    expect({ note: read.note }).toEqual({ note: encoding ? expect.stringContaining(`is ${encoding}`) : undefined });
  });

  it.each([
    [
      'state.json',
      JSON.stringify({ format_version: '1.0', terraform_version: '1.9.5', values: { root_module: {} } }),
      /is a Terraform state, not a plan/,
    ],
    ['tfplan', 'PK\u0003\u0004binary', /is a binary plan file \(terraform plan -out\), not its JSON/],
    ['broken.json', '{"format_version": ', /is not JSON: give the output of `terraform show -json PLANFILE`/],
    [
      'wrapped.json',
      '[command]/home/runner/work/_temp/terraform-bin show -json tfplan\n{"format_version":"1.2","resource_changes":[]}\n::set-output name=exitcode::0\n',
      /is not JSON: it holds the output of hashicorp\/setup-terraform's wrapper .*set `terraform_wrapper: false`/,
    ],
    ['array.json', '[]', /is not a Terraform plan \(no format_version\)/],
    ['other.json', '{"format_version": "1.0"}', /is not a Terraform plan \(none of planned_values/],
  ])('refuses %s before sending it, exit 2', async (name, content, message) => {
    const error = await readPlanJson(file(name, Buffer.from(content))).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).code).toBe(EXIT.usage);
    expect((error as CliError).message).toMatch(message);
  });

  it('knows a binary plan file by its SHA-256', async () => {
    expect(await planFileHash(file('a.tfplan', Buffer.from('plan a')))).toBe(sha256(Buffer.from('plan a')));
  });

  it('compares plan JSON whatever its key order and spacing', () => {
    expect(sameJson({ a: 1, b: [1, { c: 2, d: null }] }, JSON.parse('{ "b": [1, {"d": null, "c": 2}], "a": 1 }'))).toBe(true);
    expect(sameJson({ a: 1 }, { a: 2 })).toBe(false);
    expect(sameJson({ a: [1, 2] }, { a: [2, 1] })).toBe(false);
  });
});
