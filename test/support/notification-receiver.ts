import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request a receiver got: its headers, its exact body and that body parsed, and the status it was answered. */
export interface ReceivedNotification {
  headers: IncomingHttpHeaders;
  raw: Buffer;
  body: Record<string, unknown>;
  status: number;
}

/**
 * A webhook receiver on loopback that records every request and answers `status()` (200 unless
 * changed): a generic, Slack or Teams destination in tests. `down()` closes its port (connections are
 * refused) and `up()` listens again on the same port, for outages.
 */
export interface NotificationReceiver {
  url: string;
  received: ReceivedNotification[];
  answer(status: number): void;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startNotificationReceiver(): Promise<NotificationReceiver> {
  const received: ReceivedNotification[] = [];
  let status = 200;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      // The status is read once: what was recorded is what was answered, even if answer() changes it meanwhile.
      const answered = status;
      received.push({ headers: req.headers, raw, body: JSON.parse(raw.toString('utf8')) as Record<string, unknown>, status: answered });
      res.writeHead(answered, { 'content-type': 'text/plain' }).end(answered < 300 ? 'ok' : 'not now');
    });
  });
  const listen = (port: number): Promise<void> => new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  await listen(0);
  const port = (server.address() as AddressInfo).port;
  const close = (): Promise<void> =>
    new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    answer: (next) => {
      status = next;
    },
    down: close,
    up: () => listen(port),
    close: async () => {
      if (server.listening) await close();
    },
  };
}
