/**
 * What each command sends before it waits: `start` uploads the configuration and creates the run, `plan`
 * and `applied` report Terraform's outcome, `apply` confirms the run, `cancel` and `discard` end it. Each
 * returns the run to follow.
 */
import { archiveDirectory } from './archive.ts';
import type { Options } from './args.ts';
import { ApiRefusal, type Client, type Document } from './client.ts';
import { CliError } from './exit-codes.ts';
import { rememberedVersion, rememberVersion } from './idempotency-cache.ts';
import { planFileHash, readPlanJson, sameJson, shortHash, type PlanJson } from './plan-file.ts';

/** Prints a line of progress (above the live footer on a terminal). */
export type Say = (line: string) => void;

export interface Step {
  client: Client;
  options: Options;
  say: Say;
}

/** The header that carries the binary plan file's SHA-256 with a plan report. */
export const PLAN_FILE_HASH_HEADER = 'X-Runtasks-Plan-File-SHA256';

const CONFIRMED = new Set(['confirmed', 'pre_apply_running', 'pre_apply_awaiting_decision', 'pre_apply_completed', 'applying', 'applied']);
const ENDED = new Set(['errored', 'canceled', 'force_canceled', 'discarded', 'planned_and_finished', 'applied', 'post_apply_completed']);
const BEFORE_PLAN = new Set(['pending', 'pre_plan_running', 'pre_plan_awaiting_decision', 'pre_plan_completed', 'planning']);

const unknownRun = (runId: string): string => `unknown run ${runId} (or the token cannot see its workspace)`;
const cannot = (runId: string, need: 'plan' | 'apply'): string =>
  `unknown run ${runId}, or the token may not ${need} on its workspace: a team token needs runs "${need}"${need === 'plan' ? ' or "apply"' : ''} on the workspace (custom access)`;

const attributesOf = (doc: Document | undefined): Record<string, unknown> => doc?.data.attributes ?? {};
const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

async function readRunDoc(client: Client, runId: string): Promise<Document> {
  return client.request<Document>('GET', `/runs/${runId}`, { notFound: unknownRun(runId) });
}

/** Why a run ended, in the words its plan or apply left: for the advice on a run that cannot go on. */
async function endedBecause(client: Client, runId: string, status: string): Promise<string> {
  if (status !== 'errored') return '';
  for (const what of ['plan', 'apply'] as const) {
    const doc = await client.request<Document>('GET', `/runs/${runId}/${what}`).catch(() => undefined);
    const message = text(attributesOf(doc)['error-message']);
    if (message) return ` (its ${what}: ${message})`;
  }
  return '';
}

export async function startRun({ client, options, say }: Step): Promise<string> {
  const { organization, name } = options.workspace ?? { organization: '', name: '' };
  const where = `${organization}/${name}`;
  const workspace = await client.request<Document>('GET', `/organizations/${organization}/workspaces/${name}`, {
    notFound: `unknown workspace ${where} (or the token cannot see it)`,
  });
  const mode = workspace.data.attributes['execution-mode'];
  if (mode !== undefined && mode !== 'local') {
    throw new CliError(
      'refused',
      `workspace ${where} has execution-mode ${String(mode)}: the service plans and applies its runs itself, so a pipeline cannot report them; ` +
        `set it to local (PATCH /api/v2/workspaces/${workspace.data.id}, see docs/pipelines.md)`,
    );
  }
  const key = options.idempotency;
  const queueRights = `the token may not queue runs on ${where}: a team token needs runs "plan" or "apply" on the workspace (custom access)`;
  // A retried start sends the configuration it sent before, so that the run request is the same and finds its run.
  let versionId = key ? await rememberedVersion(client.address, key.key) : undefined;
  if (versionId) {
    say(`configuration ${versionId}: uploaded by an earlier try of this step (idempotency key from ${key?.source})`);
  } else {
    const { archive, files } = await archiveDirectory(options.configDir);
    const version = await client.request<Document>('POST', `/workspaces/${workspace.data.id}/configuration-versions`, {
      body: {
        jsonApi: { data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false, speculative: options.planOnly } } },
      },
      notFound: queueRights,
      // A second configuration version from a retry is never used: harmless.
      retry: true,
    });
    const uploadUrl = version.data.attributes['upload-url'];
    if (typeof uploadUrl !== 'string') throw new CliError('network', 'the service gave no upload URL for the configuration version');
    await client.request('PUT', uploadUrl, { anonymous: true, body: { raw: archive, contentType: 'application/octet-stream' } });
    versionId = version.data.id;
    if (key) await rememberVersion(client.address, key.key, versionId);
    say(`configuration ${versionId}: ${files} file${files === 1 ? '' : 's'} from ${options.configDir} (${archive.length} bytes)`);
  }
  let created;
  try {
    created = await client.exchange<Document>('POST', '/runs', {
      body: {
        jsonApi: {
          data: {
            type: 'runs',
            attributes: { message: options.message ?? 'Queued by runtasks', 'plan-only': options.planOnly },
            relationships: {
              workspace: { data: { type: 'workspaces', id: workspace.data.id } },
              'configuration-version': { data: { type: 'configuration-versions', id: versionId } },
            },
          },
        },
      },
      headers: key ? { 'Idempotency-Key': key.key } : {},
      notFound: queueRights,
      // Without a key a retried creation could queue a second run behind the first: only a key makes it safe.
      retry: key !== undefined,
    });
  } catch (error) {
    if (key && error instanceof ApiRefusal && error.status === 422 && /idempotency/i.test(error.message)) {
      throw new CliError(
        'refused',
        `this pipeline attempt (idempotency key from ${key.source}) already created a run in ${where} with another request: ${error.message}. ` +
          'Cancel that run (runtasks run cancel RUN) and re-run the job, or pass --idempotency-key',
      );
    }
    throw error;
  }
  const runId = created.body.data.id;
  const page = runPageOf(client.address, workspace, runId);
  if (created.status === 200 && key)
    say(`run ${runId}: created by an earlier try of this step (idempotency key from ${key.source}): ${page}`);
  else say(`run ${runId} created in ${where}: ${page}`);
  return runId;
}

/** A run's page for people: the workspace's `self-html` link and the run's id. */
export function runPageOf(address: string, workspace: Document, runId: string): string {
  const html = workspace.data.links?.['self-html'];
  const organization = (workspace.data.relationships?.['organization']?.data as { id?: string } | undefined)?.id;
  const name = workspace.data.attributes['name'];
  return html ? `${address}${html}/runs/${runId}` : `${address}/app/${organization}/workspaces/${String(name)}/runs/${runId}`;
}

/** The plan as the service has it: status, hashes, counts. */
async function planDocOf(client: Client, runId: string): Promise<Record<string, unknown>> {
  return attributesOf(await client.request<Document>('GET', `/runs/${runId}/plan`, { notFound: unknownRun(runId) }));
}

/** Whether the plan the service has is this one: by its SHA-256 where the service keeps it, else by its content. */
async function reportedIsThis(client: Client, runId: string, plan: PlanJson, reported: Record<string, unknown>): Promise<boolean> {
  const theirs = text(reported['plan-json-sha256']);
  if (theirs) return theirs === plan.sha256;
  const stored = await client.request<unknown>('GET', `/runs/${runId}/plan/json-output`);
  return sameJson(stored, JSON.parse(plan.bytes.toString('utf8')));
}

/** A 409 from a plan report: the same report retried goes on; another plan, or a failure after a plan, never does. */
async function planConflict(step: Step, runId: string, plan: PlanJson | undefined, refusal: ApiRefusal): Promise<void> {
  const { client, say } = step;
  const reported = await planDocOf(client, runId);
  const status = text(reported['status']);
  const theirs = text(reported['plan-json-sha256']);
  if (reported['execution-details'] && (reported['execution-details'] as { mode?: string }).mode === 'remote') {
    throw new CliError('refused', `run ${runId} is on a workspace with execution-mode remote: the service runs its plan itself (409)`);
  }
  if (status === 'finished' && plan && (await reportedIsThis(client, runId, plan, reported))) {
    say(`the plan of run ${runId} was reported already (the same plan, sha256 ${shortHash(plan.sha256)}); following the run`);
    return;
  }
  if (status === 'finished' && plan) {
    throw new CliError(
      'refused',
      `run ${runId} was reported another plan already: its tasks checked plan JSON sha256 ${theirs ?? '(another content)'}, this one is sha256 ${plan.sha256}; ` +
        'the run goes on with the plan it has: start a new run for this plan (409)',
    );
  }
  if (status === 'finished') {
    throw new CliError(
      'refused',
      `run ${runId}'s plan was reported as finished already (plan JSON sha256 ${theirs ?? 'unknown'}): a failure cannot replace it; ` +
        `if terraform failed this time, end the run with \`runtasks run cancel ${runId}\` (409)`,
    );
  }
  if (status === 'errored' && !plan) {
    say(`the plan of run ${runId} was reported as failed already; following the run`);
    return;
  }
  const run = attributesOf(await readRunDoc(client, runId));
  const runStatus = String(run['status']);
  if (status === 'errored') {
    throw new CliError('refused', `run ${runId}'s plan was reported as failed already: a plan cannot follow it; start a new run (409)`);
  }
  throw new CliError(
    'refused',
    `run ${runId} is ${runStatus}: its plan can be reported only while it is planning${await endedBecause(client, runId, runStatus)} (${refusal.status})`,
  );
}

export async function reportPlan(step: Step): Promise<string> {
  const { client, options, say } = step;
  const runId = options.run as string;
  if (options.errored !== undefined) {
    try {
      const { replayed } = await client.exchange('POST', `/runs/${runId}/plan/actions/error`, {
        body: { json: { message: options.errored } },
        notFound: cannot(runId, 'plan'),
        retry: true,
      });
      if (replayed) {
        say(`the plan of run ${runId} was reported as failed already; following the run`);
        return runId;
      }
    } catch (error) {
      if (!(error instanceof ApiRefusal) || error.status !== 409) throw error;
      await planConflict(step, runId, undefined, error);
      return runId;
    }
    say(`run ${runId}: reported that the plan failed`);
    return runId;
  }
  const plan = await readPlanJson(options.planJson as string);
  if (plan.note) say(plan.note);
  const fileHash = options.planFile ? await planFileHash(options.planFile) : undefined;
  try {
    const { replayed } = await client.exchange('PUT', `/runs/${runId}/plan/json-output`, {
      body: { raw: plan.bytes, contentType: 'application/json' },
      headers: fileHash ? { [PLAN_FILE_HASH_HEADER]: fileHash } : {},
      notFound: cannot(runId, 'plan'),
    });
    // The service took this very plan before (a retried step): nothing changed, the run goes on with it.
    if (replayed) {
      say(`the plan of run ${runId} was reported already (the same plan, sha256 ${shortHash(plan.sha256)}); following the run`);
      return runId;
    }
  } catch (error) {
    if (!(error instanceof ApiRefusal)) throw error;
    if (error.status === 409) {
      await planConflict(step, runId, plan, error);
      return runId;
    }
    if (error.status === 413) {
      const limit = /(\d+) bytes/.exec(error.detail ?? '')?.[1];
      throw new CliError(
        'refused',
        `the plan file ${options.planJson} (${plan.bytes.length} bytes) is larger than the service takes` +
          `${limit ? ` (${limit} bytes, its PLAN_JSON_MAX_BYTES)` : ''}: ask its operator to raise PLAN_JSON_MAX_BYTES (413)`,
      );
    }
    if (error.status === 422) {
      throw new CliError(
        'refused',
        `the service refused the plan file ${options.planJson}: ${error.message.replace(/^.*answered 422: /, '')}`,
      );
    }
    throw error;
  }
  say(
    `run ${runId}: plan reported (${plan.bytes.length} bytes, sha256 ${shortHash(plan.sha256)}` +
      `${fileHash ? `; plan file ${options.planFile} sha256 ${shortHash(fileHash)}` : ''})`,
  );
  return runId;
}

/**
 * `--plan-file` at apply: the binary plan file about to be applied must be the one whose plan the run's
 * tasks checked. Refused before anything is sent.
 */
async function checkPlanFile({ client, options, say }: Step, runId: string): Promise<void> {
  if (!options.planFile) return;
  const ours = await planFileHash(options.planFile);
  const plan = await planDocOf(client, runId);
  // A service older than plan file hashes has no such attribute at all (a plan reported without one has it null).
  if (!('plan-file-sha256' in plan)) {
    say(`warning: the service keeps no plan file hashes (a release older than this CLI): ${options.planFile} is not checked`);
    return;
  }
  const theirs = text(plan['plan-file-sha256']);
  if (!theirs) {
    throw new CliError(
      'refused',
      `run ${runId}'s plan was reported without its plan file's hash, so ${options.planFile} cannot be checked against it: ` +
        `report the plan with \`runtasks run plan ${runId} --plan-json FILE --plan-file ${options.planFile}\`, or leave out --plan-file here`,
    );
  }
  if (theirs !== ours) {
    throw new CliError(
      'refused',
      `the plan file ${options.planFile} (sha256 ${ours}) is not the one whose plan the run's tasks checked (sha256 ${theirs}): ` +
        'it was replaced or made again after `runtasks run plan`; nothing was confirmed or reported: apply the plan file that was checked, or start a new run',
    );
  }
  say(`plan file ${options.planFile} is the one checked (sha256 ${shortHash(ours)})`);
}

/** Advice for a run that cannot be confirmed in the status it is in. */
async function notConfirmable(client: Client, runId: string, status: string): Promise<CliError> {
  if (status === 'planned_and_finished') {
    return new CliError(
      'refused',
      `run ${runId} is planned_and_finished (plan-only, or a plan without changes): there is nothing to apply`,
    );
  }
  if (ENDED.has(status)) {
    return new CliError(
      'stopped',
      `run ${runId} is ${status}${await endedBecause(client, runId, status)}: it will not be applied; start a new run (runtasks run start)`,
    );
  }
  if (BEFORE_PLAN.has(status)) {
    return new CliError('refused', `run ${runId} is ${status}: report its plan first (runtasks run plan ${runId} --plan-json FILE)`);
  }
  if (status.endsWith('_awaiting_decision')) {
    return new CliError('blocked', `run ${runId} is ${status}: a mandatory task failed and the run waits for an override or a discard`);
  }
  return new CliError(
    'refused',
    `run ${runId} is ${status}: it can be confirmed once its post_plan tasks are done (runtasks run watch ${runId})`,
  );
}

export async function confirmRun(step: Step): Promise<string> {
  const { client, options, say } = step;
  const runId = options.run as string;
  const status = String(attributesOf(await readRunDoc(client, runId))['status']);
  await checkPlanFile(step, runId);
  // Auto-apply runs confirm themselves: nothing to send, only the pre_apply verdict to wait for.
  if (CONFIRMED.has(status)) {
    say(`run ${runId} is ${status}: confirmed already`);
    return runId;
  }
  if (status !== 'planned' && status !== 'post_plan_completed') throw await notConfirmable(client, runId, status);
  try {
    await client.request('POST', `/runs/${runId}/actions/apply`, {
      body: { jsonApi: { comment: options.comment ?? null } },
      notFound: cannot(runId, 'apply'),
      // A confirmation sent twice is answered 409 and read below as done.
      retry: true,
    });
  } catch (error) {
    if (!(error instanceof ApiRefusal) || error.status !== 409) throw error;
    const now = String(attributesOf(await readRunDoc(client, runId))['status']);
    if (!CONFIRMED.has(now)) throw await notConfirmable(client, runId, now);
  }
  say(`run ${runId}: apply confirmed`);
  return runId;
}

export async function reportApply(step: Step): Promise<string> {
  const { client, options, say } = step;
  const runId = options.run as string;
  const errored = options.errored;
  await checkPlanFile(step, runId);
  try {
    const { replayed } = await client.exchange(
      'POST',
      errored === undefined ? `/runs/${runId}/apply/actions/finish` : `/runs/${runId}/apply/actions/error`,
      { body: { json: errored === undefined ? {} : { message: errored } }, notFound: cannot(runId, 'apply'), retry: true },
    );
    if (replayed) {
      say(`the apply of run ${runId} was reported already; following the run`);
      return runId;
    }
  } catch (error) {
    if (!(error instanceof ApiRefusal) || error.status !== 409) throw error;
    const apply = attributesOf(await client.request<Document>('GET', `/runs/${runId}/apply`, { notFound: unknownRun(runId) }));
    const applyStatus = text(apply['status']);
    if ((apply['execution-details'] as { mode?: string } | undefined)?.mode === 'remote') {
      throw new CliError('refused', `run ${runId} is on a workspace with execution-mode remote: the service runs its apply itself (409)`);
    }
    if (applyStatus === (errored === undefined ? 'finished' : 'errored')) {
      say(`the apply of run ${runId} was reported already; following the run`);
      return runId;
    }
    if (applyStatus === 'finished' || applyStatus === 'errored') {
      throw new CliError(
        'refused',
        `run ${runId}'s apply was reported as ${applyStatus === 'finished' ? 'finished' : 'failed'} already: it cannot be reported as ${errored === undefined ? 'finished' : 'failed'} now (409)`,
      );
    }
    const status = String(attributesOf(await readRunDoc(client, runId))['status']);
    throw new CliError(
      ENDED.has(status) ? 'stopped' : 'refused',
      `run ${runId} is ${status}${await endedBecause(client, runId, status)}: its apply can be reported only while it is applying (409)`,
    );
  }
  say(`run ${runId}: reported that the apply ${errored === undefined ? 'finished' : 'failed'}`);
  return runId;
}

/**
 * `cancel` ends the run whatever it waits for: cancels a run that works, discards one that waits for a
 * confirmation or a decision, and leaves one that has ended. `discard` only discards. Both are what a
 * pipeline's clean-up step runs, so a run that ended already is not an error.
 */
export async function endRun({ client, options, say }: Step): Promise<string> {
  const runId = options.run as string;
  const read = async () => attributesOf(await readRunDoc(client, runId));
  const run = await read();
  const status = String(run['status']);
  const actions = (run['actions'] ?? {}) as Record<string, boolean | undefined>;
  if (ENDED.has(status) || status === 'post_apply_running') {
    say(`run ${runId} is ${status}: nothing to ${options.command}`);
    return runId;
  }
  const action =
    options.command === 'discard' ? 'discard' : actions['is-cancelable'] ? 'cancel' : actions['is-discardable'] ? 'discard' : 'cancel';
  try {
    await client.request('POST', `/runs/${runId}/actions/${action}`, {
      body: { jsonApi: { comment: options.comment ?? 'Ended by runtasks' } },
      notFound: cannot(runId, 'apply'),
      retry: true,
    });
  } catch (error) {
    if (!(error instanceof ApiRefusal) || error.status !== 409) throw error;
    const now = String((await read())['status']);
    if (!ENDED.has(now) && now !== 'canceled') {
      throw new CliError(
        'refused',
        options.command === 'discard'
          ? `run ${runId} is ${now}: only a run that waits for a confirmation or an override can be discarded; stop it with runtasks run cancel ${runId}`
          : `run ${runId} is ${now}: it cannot be canceled now (409)`,
      );
    }
  }
  say(
    `run ${runId}: ${action === 'cancel' ? 'cancel' : 'discard'} sent${action !== options.command ? ` (it waited for a decision: discarded rather than canceled)` : ''}`,
  );
  return runId;
}
