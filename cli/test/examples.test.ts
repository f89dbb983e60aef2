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
/** GitLab's `!reference [job, key]`, read as a marker. */
const GITLAB_TAGS = [
  { tag: '!reference', collection: 'seq' as const, resolve: (seq: { toJSON(): unknown }) => ({ reference: seq.toJSON() }) },
];

/** The shell scripts of a workflow (steps' `run`) or a GitLab pipeline (jobs' `script`). */
function scripts(document: unknown): string[] {
  const found: string[] = [];
  const visit = (node: unknown, key = ''): void => {
    if (typeof node === 'string' && ['run', 'script', 'before_script', 'after_script'].includes(key)) found.push(node);
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
      const ends = match[3] !== undefined && raw.endsWith(';');
      args.push(raw.replace(/;$/, '').replace(/\$\{?(\w+)\}?/g, (_, name: string) => VALUES[name] ?? 'x'));
      if (ends) break;
    }
    commands.push(args);
  }
  return commands;
}

describe.each(EXAMPLES)('examples/ci/$name', ({ name, text }) => {
  const document = parse(text, { customTags: GITLAB_TAGS }) as Record<string, unknown>;
  const commands = scripts(document).flatMap(runtasksCommands);

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
    for (const command of ['start', 'plan', 'apply', 'applied', 'cancel']) expect(order).toContain(command);
    expect(order.indexOf('start')).toBeLessThan(order.indexOf('plan'));
    expect(order.lastIndexOf('apply')).toBeLessThan(order.lastIndexOf('applied'));
    // A failed Terraform step is reported as such.
    expect(commands.filter((args) => args.includes('--errored')).map((args) => args[1])).toEqual(['plan', 'applied']);
  });

  it('uses only commands and options the CLI accepts', () => {
    const env = { RUNTASKS_ADDRESS: 'https://runtasks.example.com', RUNTASKS_TOKEN: 'x' };
    for (const args of commands) expect(parseCli(args, env).kind).toBe('run');
  });

  it('checks the plan file at apply against the plan reported', () => {
    const withPlanFile = commands.filter((args) => args.includes('--plan-file')).map((args) => args[1]);
    expect(withPlanFile).toEqual(['plan', 'apply', 'applied']);
  });

  it('gets the CLI from the service, pinned by its SHA-256', () => {
    expect(text).not.toContain('git clone');
    if (name === 'github-actions.yml')
      expect(text).toMatch(/uses: acme\/runtasks@v\d+\.\d+\.\d+\n\s+with:\n\s+address: .*\n\s+sha256: [0-9a-f]{64}/);
    else expect(text).toMatch(/RUNTASKS_CLI_SHA256: '[0-9a-f]{64}'/);
  });

  it('ends its run when the job fails or is cancelled', () => {
    if (name === 'github-actions.yml') {
      const steps = (document['jobs'] as Record<string, { steps: { if?: string; run?: string }[] }>)['terraform']?.steps ?? [];
      const cleanup = steps.find((step) => step.run?.includes('runtasks run cancel'));
      expect(cleanup?.if).toBe("(cancelled() || failure()) && steps.start.outputs.run != ''");
      expect(steps.at(-1)).toBe(cleanup);
    } else {
      const runtasks = document['.runtasks'] as { after_script: string[]; interruptible: boolean };
      expect(runtasks.interruptible).toBe(true);
      expect(runtasks.after_script.join('\n')).toMatch(/\$CI_JOB_STATUS" != success[\s\S]*run cancel "\$RUN_ID"/);
      const endRun = document['end-run'] as { stage: string; rules: { when: string }[] };
      expect({ stage: endRun.stage, when: endRun.rules[0]?.when }).toEqual({ stage: '.post', when: 'on_failure' });
    }
  });

  it('keeps the token out of the file', () => {
    expect(text).not.toMatch(/RUNTASKS_TOKEN:\s*['"]?[A-Za-z0-9._-]{20,}/);
  });
});
