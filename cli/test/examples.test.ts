import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { parseCli } from '../src/args.ts';

/**
 * The CI examples stay in step with the CLI: they parse as YAML, run Terraform's steps, and every
 * `runtasks` command in them is one the CLI accepts (shell variables given plausible values).
 */
const EXAMPLES = ['github-actions.yml', 'gitlab-ci.yml'].map((name) => ({
  name,
  text: readFileSync(fileURLToPath(new URL(`../../examples/ci/${name}`, import.meta.url)), 'utf8'),
}));
const VALUES: Record<string, string> = { RUN_ID: 'run-abc1', RUNTASKS_WORKSPACE: 'acme/network' };

/** The shell scripts of a workflow (steps' `run`) or a GitLab pipeline (jobs' `script`). */
function scripts(document: unknown): string[] {
  const found: string[] = [];
  const visit = (node: unknown, key = ''): void => {
    if (typeof node === 'string' && (key === 'run' || key === 'script')) found.push(node);
    else if (Array.isArray(node)) node.forEach((item) => visit(item, key));
    else if (node && typeof node === 'object') for (const [name, value] of Object.entries(node)) visit(value, name);
  };
  visit(document);
  return found;
}

/** Each `runtasks …` command line as arguments, with `${{ }}` and `$VARS` replaced. */
function runtasksCommands(script: string): string[][] {
  const text = script
    .replace(/\\\n\s*/g, ' ')
    .replace(/\$\{\{([^}]*)\}\}/g, (_, expression: string) =>
      expression.includes('outputs.run') ? 'run-abc1' : expression.includes('--plan-only') ? '--plan-only' : 'x',
    );
  const commands: string[][] = [];
  for (const line of text.split('\n')) {
    const at = line.indexOf('runtasks run ');
    if (at === -1) continue;
    const args: string[] = [];
    for (const match of line.slice(at + 'runtasks '.length).matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)) {
      const raw = match[1] ?? match[2] ?? match[3] ?? '';
      if (match[3] !== undefined && /^(>|\||;|&&)/.test(raw)) break;
      if (raw === '$PLAN_ONLY') continue;
      args.push(raw.replace(/\$\{?(\w+)\}?/g, (_, name: string) => VALUES[name] ?? 'x'));
    }
    commands.push(args);
  }
  return commands;
}

describe.each(EXAMPLES)('examples/ci/$name', ({ text }) => {
  const commands = scripts(parse(text)).flatMap(runtasksCommands);

  it('runs the real Terraform steps', () => {
    for (const step of [
      'terraform init',
      'terraform plan -input=false -out=tfplan',
      'terraform show -json tfplan',
      'terraform apply -input=false tfplan',
    ]) {
      expect(text).toContain(step);
    }
  });

  it('reports every step through the CLI, in order', () => {
    const order = commands.map((args) => args[1]);
    for (const command of ['start', 'plan', 'apply', 'applied']) expect(order).toContain(command);
    expect(order.indexOf('start')).toBeLessThan(order.indexOf('plan'));
    expect(order.lastIndexOf('apply')).toBeLessThan(order.lastIndexOf('applied'));
    // A failed Terraform step is reported as such.
    expect(commands.filter((args) => args.includes('--errored')).map((args) => args[1])).toEqual(['plan', 'applied']);
  });

  it('uses only commands and options the CLI accepts', () => {
    const env = { RUNTASKS_ADDRESS: 'https://runtasks.example.com', RUNTASKS_TOKEN: 'x' };
    for (const args of commands) expect(parseCli(args, env).kind).toBe('run');
  });

  it('keeps the token out of the file', () => {
    expect(text).not.toMatch(/RUNTASKS_TOKEN:\s*['"]?[A-Za-z0-9._-]{20,}/);
  });
});
