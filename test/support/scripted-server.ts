import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * Scripted task servers for the fault tests: small node:http listeners on loopback that answer the
 * verification request themselves and hand every run task request to the scenario's responder,
 * recording what they received. Plus what a task server does next (call back) and what the scenarios
 * read back (settled runs, final result timestamps).
 */

/** The token of verification requests (sent at task creation), never a result's own. */
const VERIFICATION_TOKEN = 'test-token';

/** Statuses a run without auto-apply does not leave by itself. */
export const SETTLED = new Set([
  'post_plan_completed',
  'errored',
  'canceled',
  'discarded',
  'planned_and_finished',
  'applied',
  'post_apply_completed',
]);
const FINAL_RESULT = ['passed', 'failed', 'errored', 'canceled', 'unreachable'];

/** The `…-at` keys of a result's final statuses (one, once it has ended). */
export const finalKeys = (row: { status_timestamps: Record<string, string> }): string[] =>
  Object.keys(row.status_timestamps).filter((key) => FINAL_RESULT.includes(key.replace(/-at$/, '')));

/** A callback a scripted server fires on its own may still be in flight when the API closes; the scenario's assertions already ran. */
export const afterTeardown = (): void => undefined;

/** HMAC-SHA512 (hex) of a request body, as the task server computes it. */
export const hmac = (key: string, body: Buffer): string => createHmac('sha512', key).update(body).digest('hex');

export interface RunTaskPayload {
  task_result_id: string;
  task_result_callback_url: string;
  access_token: string;
  run_id: string;
}

/** One run task request as a scripted server received it. */
export interface Delivery {
  payload: RunTaskPayload;
  /** The body's bytes, as signed. */
  body: Buffer;
  /** 1 for the first POST of this result, 2 for its first retry, … */
  attempt: number;
  signature: string;
  receivedAt: number;
}

/** What a scripted server does with a run task request (its body already read). */
export type Responder = (delivery: Delivery, res: ServerResponse, req: IncomingMessage) => void;

export interface ScriptedServer {
  url: string;
  deliveries: Delivery[];
  /** Destroys open connections, then stops listening. */
  close(): Promise<void>;
}

/**
 * A loopback task server: verification requests get 200 (with `hmacKey`, only when signed with it;
 * 401 otherwise), run task requests go to `respond`.
 */
export async function startScriptedServer(respond: Responder, hmacKey: string | null = null): Promise<ScriptedServer> {
  const deliveries: Delivery[] = [];
  const sockets = new Set<Socket>();
  const perResult = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const payload = JSON.parse(body.toString('utf8')) as RunTaskPayload;
      const signature = String(req.headers['x-tfc-task-signature'] ?? '');
      if (payload.access_token === VERIFICATION_TOKEN) {
        res.writeHead(hmacKey === null || signature === hmac(hmacKey, body) ? 200 : 401).end();
        return;
      }
      const attempt = (perResult.get(payload.task_result_id) ?? 0) + 1;
      perResult.set(payload.task_result_id, attempt);
      const delivery = { payload, body, attempt, signature, receivedAt: Date.now() };
      deliveries.push(delivery);
      respond(delivery, res, req);
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/run-task`,
    deliveries,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** PATCHes the result's callback URL with its access token, as a task server does; the HTTP status. */
export async function callBack(payload: RunTaskPayload, status: 'running' | 'passed' | 'failed'): Promise<number> {
  const response = await fetch(payload.task_result_callback_url, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${payload.access_token}`, 'content-type': 'application/vnd.api+json' },
    body: JSON.stringify({ data: { type: 'task-results', attributes: { status, message: `reported ${status}` } } }),
  });
  await response.arrayBuffer();
  return response.status;
}
