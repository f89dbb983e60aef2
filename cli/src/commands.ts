/**
 * What each command sends before it waits: `start` uploads the configuration and creates the run, `plan`
 * and `applied` report Terraform's outcome, `apply` confirms the run. Each returns the run to follow.
 */
import { readFile, stat } from 'node:fs/promises';
import { archiveDirectory } from './archive.ts';
import type { Options } from './args.ts';
import { ApiRefusal, type Client, type Document } from './client.ts';
import { CliError } from './exit-codes.ts';

/** Prints a line of progress (above the live footer on a terminal). */
export type Say = (line: string) => void;

const PLAN_AT = new Set(['planning']);
const APPLY_AT = new Set(['applying']);
const CONFIRMED = new Set(['confirmed', 'pre_apply_running', 'pre_apply_awaiting_decision', 'pre_apply_completed', 'applying', 'applied']);

export async function startRun(client: Client, options: Options, say: Say): Promise<string> {
  const { organization, name } = options.workspace ?? { organization: '', name: '' };
  const workspace = await client.request<Document>('GET', `/organizations/${organization}/workspaces/${name}`, {
    notFound: `unknown workspace ${organization}/${name} (or the token cannot see it)`,
  });
  const mode = workspace.data.attributes['execution-mode'];
  if (mode !== undefined && mode !== 'local') {
    say(
      `warning: workspace ${organization}/${name} has execution-mode ${String(mode)}: the service plans and applies its runs itself; set it to local for a pipeline`,
    );
  }
  const { archive, files } = await archiveDirectory(options.configDir);
  const version = await client.request<Document>('POST', `/workspaces/${workspace.data.id}/configuration-versions`, {
    body: {
      jsonApi: { data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false, speculative: options.planOnly } } },
    },
  });
  const uploadUrl = version.data.attributes['upload-url'];
  if (typeof uploadUrl !== 'string') throw new CliError('network', 'the service gave no upload URL for the configuration version');
  await client.request('PUT', uploadUrl, { anonymous: true, body: { raw: archive, contentType: 'application/octet-stream' } });
  say(`configuration ${version.data.id}: ${files} file${files === 1 ? '' : 's'} from ${options.configDir} (${archive.length} bytes)`);
  const run = await client.request<Document>('POST', '/runs', {
    body: {
      jsonApi: {
        data: {
          type: 'runs',
          attributes: { message: options.message ?? 'Queued by runtasks', 'plan-only': options.planOnly },
          relationships: {
            workspace: { data: { type: 'workspaces', id: workspace.data.id } },
            'configuration-version': { data: { type: 'configuration-versions', id: version.data.id } },
          },
        },
      },
    },
  });
  say(`run ${run.data.id} created in ${organization}/${name}: ${options.address}/api/v2/runs/${run.data.id}`);
  return run.data.id;
}

async function readPlanFile(file: string): Promise<Buffer> {
  let content: Buffer;
  try {
    if (!(await stat(file)).isFile()) throw new Error('not a file');
    content = await readFile(file);
  } catch {
    throw new CliError('usage', `cannot read the plan file ${file}`);
  }
  let plan: unknown;
  try {
    plan = JSON.parse(content.toString('utf8'));
  } catch {
    throw new CliError('usage', `${file} is not JSON: give the output of \`terraform show -json PLANFILE\``);
  }
  if (typeof plan !== 'object' || plan === null || Array.isArray(plan) || !('format_version' in plan)) {
    throw new CliError(
      'usage',
      `${file} is not a Terraform plan (no format_version): give the output of \`terraform show -json PLANFILE\``,
    );
  }
  return content;
}

/**
 * Sends a report; a 409 whose report already went through (a pipeline's step retried) is not an
 * error: the command follows the run from there. Any other 409 says what status the run is in.
 */
async function report(
  client: Client,
  runId: string,
  allowedAt: ReadonlySet<string>,
  what: 'plan' | 'apply',
  send: () => Promise<unknown>,
  say: Say,
): Promise<void> {
  try {
    await send();
  } catch (error) {
    if (!(error instanceof ApiRefusal) || error.status !== 409) throw error;
    const run = await client.request<Document>('GET', `/runs/${runId}`);
    const status = String(run.data.attributes['status']);
    const resource = await client.request<Document>('GET', `/runs/${runId}/${what}`).catch(() => undefined);
    const mode = (resource?.data.attributes['execution-details'] as { mode?: string } | undefined)?.mode;
    if (mode === 'remote') {
      throw new CliError('refused', `run ${runId} is on a workspace with execution-mode remote: the service runs its ${what} itself (409)`);
    }
    if (resource?.data.attributes['status'] === 'finished') {
      say(`the ${what} of run ${runId} was reported already; following the run (${status})`);
      return;
    }
    const when = [...allowedAt].join(' or ');
    throw new CliError('refused', `run ${runId} is ${status}: its ${what} can be reported only while it is ${when} (409)`);
  }
}

export async function reportPlan(client: Client, options: Options, say: Say): Promise<string> {
  const runId = options.run as string;
  if (options.errored !== undefined) {
    await report(
      client,
      runId,
      PLAN_AT,
      'plan',
      () =>
        client.request('POST', `/runs/${runId}/plan/actions/error`, {
          body: { json: { message: options.errored } },
          notFound: cannotReport(runId, 'plan'),
        }),
      say,
    );
    say(`run ${runId}: reported that the plan failed`);
    return runId;
  }
  const plan = await readPlanFile(options.planJson as string);
  await report(
    client,
    runId,
    PLAN_AT,
    'plan',
    async () => {
      try {
        await client.request('PUT', `/runs/${runId}/plan/json-output`, {
          body: { raw: plan, contentType: 'application/json' },
          notFound: cannotReport(runId, 'plan'),
        });
      } catch (error) {
        if (error instanceof ApiRefusal && error.status === 413) {
          throw new CliError(
            'refused',
            `the plan file ${options.planJson} (${plan.length} bytes) is larger than the service accepts (413)`,
          );
        }
        if (error instanceof ApiRefusal && error.status === 422) {
          throw new CliError(
            'refused',
            `the service refused the plan file ${options.planJson}: ${error.message.replace(/^.*answered 422: /, '')}`,
          );
        }
        throw error;
      }
    },
    say,
  );
  say(`run ${runId}: plan reported (${plan.length} bytes)`);
  return runId;
}

export async function confirmRun(client: Client, options: Options, say: Say): Promise<string> {
  const runId = options.run as string;
  const run = await client.request<Document>('GET', `/runs/${runId}`, { notFound: unknownRun(runId) });
  const status = String(run.data.attributes['status']);
  // Auto-apply runs confirm themselves: nothing to send, only the pre_apply verdict to wait for.
  if (CONFIRMED.has(status)) {
    say(`run ${runId} is ${status}: confirmed already`);
    return runId;
  }
  if (status === 'planned_and_finished') {
    throw new CliError('refused', `run ${runId} is planned_and_finished (plan-only, or a plan without changes): there is nothing to apply`);
  }
  try {
    await client.request('POST', `/runs/${runId}/actions/apply`, {
      body: { jsonApi: { comment: options.comment ?? null } },
      notFound: cannotReport(runId, 'apply'),
    });
  } catch (error) {
    if (error instanceof ApiRefusal && error.status === 409) {
      throw new CliError('refused', `run ${runId} is ${status}: it can be confirmed once its post_plan tasks are done (409)`);
    }
    throw error;
  }
  say(`run ${runId}: apply confirmed`);
  return runId;
}

export async function reportApply(client: Client, options: Options, say: Say): Promise<string> {
  const runId = options.run as string;
  const errored = options.errored;
  await report(
    client,
    runId,
    APPLY_AT,
    'apply',
    () =>
      errored === undefined
        ? client.request('POST', `/runs/${runId}/apply/actions/finish`, { body: { json: {} }, notFound: cannotReport(runId, 'apply') })
        : client.request('POST', `/runs/${runId}/apply/actions/error`, {
            body: { json: { message: errored } },
            notFound: cannotReport(runId, 'apply'),
          }),
    say,
  );
  say(`run ${runId}: reported that the apply ${errored === undefined ? 'finished' : 'failed'}`);
  return runId;
}

const unknownRun = (runId: string): string => `unknown run ${runId} (or the token cannot see its workspace)`;
const cannotReport = (runId: string, need: 'plan' | 'apply'): string =>
  `unknown run ${runId}, or the token may not ${need} on its workspace (a team needs runs "${need}" or more)`;
