/**
 * An example run task server for HCP Terraform-compatible run tasks (payload version 1).
 *
 * Copy it as a starting point: it verifies the `X-TFC-Task-Signature` HMAC over the raw body,
 * answers the verification request, acknowledges a run with 200, then reads the plan and reports a
 * result by PATCHing `task_result_callback_url`. No dependencies: node:http, node:crypto and the
 * global `fetch` (which also speaks https, as real callback URLs do).
 *
 *   node examples/run-task-server/server.ts            # settings from env vars, see README.md
 *
 * The `mode` option makes it misbehave on purpose, for end-to-end tests of the service that calls it.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';

export type TaskResultStatus = 'passed' | 'failed';

/**
 * - `callback`: acknowledge with 200, then call back (the normal flow).
 * - `no-callback`: acknowledge, never call back.
 * - `status:<code>`: answer that HTTP status, never call back.
 * - `callback-before-ack`: call back and wait for the answer before acknowledging (as HashiCorp's scaffold does).
 * - `double-callback`: send the final callback twice.
 * - `slow:<ms>`: wait that long before acknowledging, then call back.
 * - `progress`: send a `running` callback, then the final one.
 */
export type RunTaskMode =
  'callback' | 'no-callback' | 'callback-before-ack' | 'double-callback' | 'progress' | `status:${number}` | `slow:${number}`;

export interface RunTaskServerOptions {
  /** Port to listen on; 0 picks a free one. Default 0. */
  port?: number;
  /** Interface to listen on. Default 127.0.0.1. */
  host?: string;
  /** Shared HMAC key; without one, requests must carry an empty signature. */
  hmacKey?: string;
  /** Result of the final callback. Default passed. */
  result?: TaskResultStatus;
  /** Default callback. */
  mode?: RunTaskMode;
  /** GET plan_json_api_url (when the payload has one) before reporting. Default true. */
  readPlan?: boolean;
  /** Wait this long before the final callback. Default 0. */
  callbackDelayMs?: number;
  /** Base of the links put in results (`<publicUrl>/results/<task result id>`). Default: the listening URL. */
  publicUrl?: string;
  /** Called with one line per request, received or sent. Default: silent. */
  log?: (line: string) => void;
  /**
   * Retries of a plan read or callback that got no answer, or 429, 502, 503 or 504 (after Retry-After, at most
   * 10 s, else 0.5 s, 1 s, 2 s…). Safe for callbacks too: a repeated final callback gets 409. Default 3.
   */
  retries?: number;
  /** How long one attempt of a plan read or callback may take. Default 10 s. */
  timeoutMs?: number;
}

/** The fields of a payload version 1 request this server uses; the rest are kept as received. */
export interface RunTaskPayload {
  payload_version: number;
  stage: string;
  access_token: string;
  capabilities?: { outcomes?: boolean };
  plan_json_api_url?: string | null;
  task_result_callback_url: string;
  task_result_id: string;
  task_result_enforcement_level: string;
  run_id: string;
  organization_name: string;
  workspace_name: string;
  [field: string]: unknown;
}

/** One outbound request this server made, and how it ended (`status` is null when it never got an answer). */
export interface OutboundCall {
  method: 'GET' | 'PATCH';
  url: string;
  /** The last attempt's status. */
  status: number | null;
  error?: string;
  /** How the attempts before the last ended, when it was retried (a status, or the error of one with no answer). */
  retried?: string[];
}

export interface CallbackCall extends OutboundCall {
  /** The status this callback reported. */
  resultStatus: 'running' | TaskResultStatus;
  /** The JSON:API body sent. */
  body: string;
}

/** Every request the server received, as received, with what it did about it (fields fill in as it goes). */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The raw body, exactly as received (the signature covers these bytes). */
  body: string;
  /** The parsed JSON body, when it parsed. */
  payload: RunTaskPayload | undefined;
  /** True when the signature matched the key, or when there is no key and the signature was empty. */
  signatureVerified: boolean;
  /** True for the verification request (access_token "test-token"). */
  verification: boolean;
  /** The HTTP status this server answered; undefined until it has answered. */
  status: number | undefined;
  /** The plan read, when one was made. */
  plan: OutboundCall | undefined;
  /** Every callback made, in order. */
  callbacks: CallbackCall[];
  /** True once all work for this request is over (answered, and every callback made). */
  done: boolean;
}

export interface RunTaskServer {
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Stops listening, drops connections and abandons pending callbacks. */
  close(): Promise<void>;
}

const VERIFICATION_TOKEN = 'test-token';
const MAX_BODY_BYTES = 1024 * 1024;
const OUTBOUND_TIMEOUT_MS = 10_000;
const RETRY_BASE_MS = 500;
const RETRIED_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);
const OUTCOME_ID = 'EXAMPLE-1';

type ParsedMode =
  | { kind: 'callback' | 'no-callback' | 'callback-before-ack' | 'double-callback' | 'progress' }
  | { kind: 'status'; status: number }
  | { kind: 'slow'; ms: number };

export function parseMode(mode: string): ParsedMode {
  switch (mode) {
    case 'callback':
    case 'no-callback':
    case 'callback-before-ack':
    case 'double-callback':
    case 'progress':
      return { kind: mode };
  }
  const match = /^(status|slow):(\d+)$/.exec(mode);
  if (match?.[1] === 'status' && Number(match[2]) >= 100 && Number(match[2]) <= 599) return { kind: 'status', status: Number(match[2]) };
  if (match?.[1] === 'slow') return { kind: 'slow', ms: Number(match[2]) };
  throw new Error(
    `unknown mode "${mode}": expected callback, no-callback, status:<code>, callback-before-ack, double-callback, slow:<ms> or progress`,
  );
}

/** Lowercase hex HMAC-SHA512 of the raw bytes: what `X-TFC-Task-Signature` carries. */
export function signPayload(body: Buffer | string, hmacKey: string): string {
  return createHmac('sha512', hmacKey).update(body).digest('hex');
}

type SignatureCheck = { ok: true } | { ok: false; status: 400 | 401; reason: string };

/** As HashiCorp's scaffold: with a key the signature must match (401); without one it must be empty (400). */
function checkSignature(body: Buffer, header: string, hmacKey: string | undefined): SignatureCheck {
  if (!hmacKey) {
    return header === '' ? { ok: true } : { ok: false, status: 400, reason: 'signature sent but no HMAC key is configured' };
  }
  if (header === '') return { ok: false, status: 401, reason: 'missing signature' };
  const expected = Buffer.from(signPayload(body, hmacKey), 'utf8');
  const received = Buffer.from(header.toLowerCase(), 'utf8');
  // timingSafeEqual throws on different lengths; a length mismatch is simply a wrong signature.
  if (received.length !== expected.length || !timingSafeEqual(received, expected)) {
    return { ok: false, status: 401, reason: 'signature mismatch' };
  }
  return { ok: true };
}

function headerValue(headers: IncomingHttpHeaders, name: string): string {
  const value = headers[name];
  return (Array.isArray(value) ? value.join(',') : (value ?? '')).trim();
}

function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        resolve(undefined);
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function isPayload(value: unknown): value is RunTaskPayload {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && typeof (value as RunTaskPayload).access_token === 'string';
}

function isHttpUrl(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

function errorMessage(error: unknown): string {
  const cause = (error as { cause?: { message?: string } }).cause?.message;
  return cause ? `${(error as Error).message}: ${cause}` : String((error as Error).message ?? error);
}

interface PlanSummary {
  changes: number;
  byAction: Record<string, number>;
}

/** Counts the resource changes of a JSON plan (`terraform show -json`); "no-op" and "read" are not changes. */
function summarisePlan(plan: unknown): PlanSummary {
  const summary: PlanSummary = { changes: 0, byAction: {} };
  const changes = (plan as { resource_changes?: unknown }).resource_changes;
  if (!Array.isArray(changes)) return summary;
  for (const change of changes) {
    const actions = (change as { change?: { actions?: unknown } }).change?.actions;
    if (!Array.isArray(actions)) continue;
    const action = actions.join('-');
    if (action === 'no-op' || action === 'read' || action === '') continue;
    summary.changes += 1;
    summary.byAction[action] = (summary.byAction[action] ?? 0) + 1;
  }
  return summary;
}

/** Starts the server; resolves once it listens. */
/** Whether a body is a notification's generic payload (it names a notification configuration). */
function isNotificationPayload(body: string): boolean {
  try {
    const parsed: unknown = JSON.parse(body);
    return typeof parsed === 'object' && parsed !== null && 'notification_configuration_id' in parsed;
  } catch {
    return false;
  }
}

export async function startRunTaskServer(options: RunTaskServerOptions = {}): Promise<RunTaskServer> {
  const host = options.host ?? '127.0.0.1';
  const mode = parseMode(options.mode ?? 'callback');
  const result: TaskResultStatus = options.result ?? 'passed';
  if (result !== 'passed' && result !== 'failed') throw new Error(`result must be passed or failed, not "${String(result)}"`);
  const readPlan = options.readPlan ?? true;
  const callbackDelayMs = options.callbackDelayMs ?? 0;
  const retries = options.retries ?? 3;
  const timeoutMs = options.timeoutMs ?? OUTBOUND_TIMEOUT_MS;
  const log = options.log ?? ((): void => {});
  const requests: RecordedRequest[] = [];
  const pending = new Set<Promise<void>>();
  const closing = new AbortController();
  let publicUrl = '';

  /** GET/PATCH with the run's bearer token, retried while the answer is transient; never throws, records how it ended. */
  async function send(call: OutboundCall, token: string, body?: string): Promise<string | undefined> {
    for (let attempt = 0; ; attempt += 1) {
      const { text, retryAfterMs } = await sendOnce(call, token, body);
      if (retryAfterMs === undefined || attempt >= retries || closing.signal.aborted) return text;
      (call.retried ??= []).push(call.status === null ? (call.error ?? 'no answer') : String(call.status));
      await sleep(retryAfterMs || RETRY_BASE_MS * 2 ** attempt, closing.signal);
      call.status = null;
      delete call.error;
    }
  }

  /** One attempt; `retryAfterMs` is set (the wait, 0 for "the default backoff") when it is worth another. */
  async function sendOnce(call: OutboundCall, token: string, body?: string): Promise<{ text?: string; retryAfterMs?: number }> {
    try {
      const response = await fetch(call.url, {
        method: call.method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? { accept: 'application/json' } : { 'content-type': 'application/vnd.api+json' }),
        },
        body,
        signal: AbortSignal.any([closing.signal, AbortSignal.timeout(timeoutMs)]),
      });
      call.status = response.status;
      const text = await response.text();
      log(`-> ${call.method} ${call.url} ${response.status}`);
      if (response.ok) return { text };
      if (!RETRIED_STATUSES.has(response.status)) return {};
      const seconds = Number(response.headers.get('retry-after'));
      return { retryAfterMs: Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds, 10) * 1000 : 0 };
    } catch (error) {
      call.error = errorMessage(error);
      log(`-> ${call.method} ${call.url} failed: ${call.error}`);
      return { retryAfterMs: 0 };
    }
  }

  function callbackBody(
    payload: RunTaskPayload,
    status: CallbackCall['resultStatus'],
    plan: PlanSummary | undefined,
    planError?: string,
  ): string {
    const url = `${publicUrl}/results/${encodeURIComponent(payload.task_result_id)}`;
    if (status === 'running') {
      return JSON.stringify({ data: { type: 'task-results', attributes: { status, message: 'Example check in progress…', url } } });
    }
    const what = planError
      ? `could not read the plan (${planError})`
      : plan
        ? `${plan.changes} resource change${plan.changes === 1 ? '' : 's'} reviewed`
        : 'no plan to review at this stage';
    const message = `Example check ${status}: ${what}.`;
    const rows = plan ? Object.entries(plan.byAction).map(([action, count]) => `| ${action} | ${count} |`) : [];
    const markdown = [
      `## Example run task: ${status}`,
      '',
      `Run \`${payload.run_id}\` in workspace \`${payload.organization_name}/${payload.workspace_name}\`, stage \`${payload.stage}\`.`,
      '',
      what.charAt(0).toUpperCase() + what.slice(1) + '.',
      ...(rows.length > 0 ? ['', '| Action | Resources |', '| --- | --- |', ...rows] : []),
    ].join('\n');
    const attributes = { status, message, url };
    if (payload.capabilities?.outcomes === false) return JSON.stringify({ data: { type: 'task-results', attributes } });
    const outcome = {
      type: 'task-result-outcomes',
      attributes: {
        'outcome-id': OUTCOME_ID,
        description: message,
        body: markdown,
        url: `${url}#${OUTCOME_ID}`,
        tags: { Status: [{ label: status === 'passed' ? 'Passed' : 'Failed', level: status === 'passed' ? 'info' : 'error' }] },
      },
    };
    return JSON.stringify({ data: { type: 'task-results', attributes, relationships: { outcomes: { data: [outcome] } } } });
  }

  async function callback(
    record: RecordedRequest,
    payload: RunTaskPayload,
    status: CallbackCall['resultStatus'],
    body: string,
  ): Promise<void> {
    if (closing.signal.aborted) return;
    const call: CallbackCall = { method: 'PATCH', url: payload.task_result_callback_url, status: null, resultStatus: status, body };
    record.callbacks.push(call);
    await send(call, payload.access_token, body);
  }

  /** Reads the plan (if asked and there is one), then reports: the part a real task would replace. */
  async function work(record: RecordedRequest, payload: RunTaskPayload): Promise<void> {
    if (mode.kind === 'progress') await callback(record, payload, 'running', callbackBody(payload, 'running', undefined));
    let plan: PlanSummary | undefined;
    let planError: string | undefined;
    if (readPlan && isHttpUrl(payload.plan_json_api_url) && !closing.signal.aborted) {
      record.plan = { method: 'GET', url: payload.plan_json_api_url, status: null };
      const text = await send(record.plan, payload.access_token);
      try {
        if (text === undefined)
          throw new Error(record.plan.status === null ? (record.plan.error ?? 'no answer') : `HTTP ${record.plan.status}`);
        plan = summarisePlan(JSON.parse(text));
      } catch (error) {
        planError = (error as Error).message;
      }
    }
    await sleep(callbackDelayMs, closing.signal);
    const status: TaskResultStatus = planError ? 'failed' : result;
    const body = callbackBody(payload, status, plan, planError);
    await callback(record, payload, status, body);
    if (mode.kind === 'double-callback') await callback(record, payload, status, body);
  }

  function track(job: Promise<void>): Promise<void> {
    pending.add(job);
    return job.finally(() => pending.delete(job));
  }

  function answer(record: RecordedRequest | undefined, res: ServerResponse, status: number, message: string, started: number): void {
    if (record) record.status = status;
    res
      .writeHead(status, { 'content-type': 'application/json' })
      .end(JSON.stringify(status === 200 ? { status: 'ok' } : { error: message }));
    const payload = record?.payload;
    const fields = { stage: payload?.stage, run: payload?.run_id, task_result: payload?.task_result_id };
    const about = Object.entries(fields)
      .filter(([, value]) => typeof value === 'string')
      .map(([name, value]) => ` ${name}=${String(value)}`)
      .join('');
    log(`<- ${res.req.method} ${res.req.url} ${status}${about} (${message}, ${Math.round(performance.now() - started)} ms)`);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    res.on('error', () => {});
    const path = req.url ?? '/';
    if (req.method === 'GET' && path.startsWith('/results/')) {
      // The link results carry: a real task would show its findings here.
      const id = decodeURIComponent(path.slice('/results/'.length).split('#')[0] ?? '');
      const last = [...requests].reverse().find((r) => r.payload?.task_result_id === id && r.callbacks.length > 0);
      const sent = last?.callbacks.at(-1);
      res.writeHead(sent ? 200 : 404, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(sent ? `Task result ${id}: ${sent.resultStatus}\n\n${sent.body}\n` : `No result reported for ${id}.\n`);
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST', 'content-type': 'application/json' }).end(JSON.stringify({ error: 'POST a run task payload' }));
      log(`<- ${req.method} ${path} 405`);
      return;
    }
    const raw = await readBody(req);
    if (raw === undefined) return answer(undefined, res, 413, 'body too large', started);
    const signature = checkSignature(raw, headerValue(req.headers, 'x-tfc-task-signature'), options.hmacKey);
    let payload: RunTaskPayload | undefined;
    try {
      const parsed: unknown = JSON.parse(raw.toString('utf8'));
      if (isPayload(parsed)) payload = parsed;
    } catch {
      payload = undefined;
    }
    const record: RecordedRequest = {
      method: req.method,
      path,
      headers: req.headers,
      body: raw.toString('utf8'),
      payload,
      signatureVerified: signature.ok,
      verification: payload?.access_token === VERIFICATION_TOKEN,
      status: undefined,
      plan: undefined,
      callbacks: [],
      done: false,
    };
    requests.push(record);
    try {
      const contentType = (headerValue(req.headers, 'content-type').split(';')[0] ?? '').trim().toLowerCase();
      if (contentType !== 'application/json') return answer(record, res, 400, 'Content-Type must be application/json', started);
      if (!signature.ok) return answer(record, res, signature.status, signature.reason, started);
      // A notification (HCP's generic payload, e.g. a configuration's verification) pointed here is acknowledged, and nothing else.
      if (!payload && isNotificationPayload(record.body))
        return answer(record, res, 200, 'notification acknowledged (not acted on)', started);
      if (!payload) return answer(record, res, 400, 'body is not a run task payload', started);
      // Sent when a task is created or updated, to check the URL and the HMAC key: no run, no callback.
      if (record.verification) return answer(record, res, 200, 'verification request', started);
      if (!isHttpUrl(payload.task_result_callback_url))
        return answer(record, res, 400, 'task_result_callback_url is not an http(s) URL', started);
      switch (mode.kind) {
        case 'status':
          return answer(record, res, mode.status, `mode status:${mode.status}`, started);
        case 'no-callback':
          return answer(record, res, 200, 'acknowledged, mode no-callback', started);
        case 'callback-before-ack':
          await track(work(record, payload));
          return answer(record, res, 200, 'acknowledged after the callback', started);
        case 'slow':
          await sleep(mode.ms, closing.signal);
          break;
      }
      answer(record, res, 200, 'acknowledged', started);
      // Acknowledge first, then work: the caller is waiting only for the 200.
      await track(work(record, payload));
    } finally {
      record.done = true;
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log(`<- ${req.method} ${req.url} failed: ${errorMessage(error)}`);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'internal error' }));
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('server is not listening on a TCP port');
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
  publicUrl = (options.publicUrl ?? url).replace(/\/+$/, '');

  return {
    url,
    port: address.port,
    requests,
    close: async () => {
      closing.abort();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await Promise.allSettled([...pending]);
      await closed;
    },
  };
}

function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, not "${raw}"`);
  return value;
}

async function main(): Promise<void> {
  const env = process.env;
  const write = (line: string): void => {
    process.stdout.write(`${new Date().toISOString()} ${line}\n`);
  };
  let server: RunTaskServer;
  try {
    const readPlan = (env['READ_PLAN'] ?? 'true').toLowerCase();
    server = await startRunTaskServer({
      port: envNumber('PORT', 8080),
      host: env['HOST'] || '127.0.0.1',
      hmacKey: env['HMAC_KEY'] || undefined,
      result: (env['RESULT'] || 'passed') as TaskResultStatus,
      mode: (env['MODE'] || 'callback') as RunTaskMode,
      readPlan: !['false', '0', 'no'].includes(readPlan),
      callbackDelayMs: envNumber('CALLBACK_DELAY_MS', 0),
      publicUrl: env['PUBLIC_URL'] || undefined,
      log: write,
    });
  } catch (error) {
    process.stderr.write(`run task server: ${errorMessage(error)}\n`);
    process.exit(1);
  }
  const settings = [
    `mode=${env['MODE'] || 'callback'}`,
    `result=${env['RESULT'] || 'passed'}`,
    `hmac=${env['HMAC_KEY'] ? 'on' : 'off'}`,
  ].join(' ');
  process.stdout.write(`Run task server listening on ${server.url} (${settings})\n`);
  const stop = (): void => {
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (import.meta.main) await main();
