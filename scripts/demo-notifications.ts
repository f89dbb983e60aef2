import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One notification the demo's receiver got: its payload and whether its signature matched the token. */
export interface DemoNotification {
  payload: { notifications?: { trigger?: string; message?: string }[] } & Record<string, unknown>;
  signed: boolean;
}

/**
 * The demo's webhook receiver: a generic notification destination on loopback that checks
 * X-TFE-Notification-Signature (HMAC-SHA512 of the body with the configuration's token) and keeps what it got.
 */
export async function startNotificationReceiver(
  token: string,
): Promise<{ url: string; received: DemoNotification[]; close: () => Promise<void> }> {
  const received: DemoNotification[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const expected = createHmac('sha512', token).update(body).digest();
      const given = Buffer.from(String(req.headers['x-tfe-notification-signature'] ?? ''), 'hex');
      let payload: DemoNotification['payload'] = {};
      try {
        payload = JSON.parse(body.toString('utf8')) as DemoNotification['payload'];
      } catch {
        // Kept as empty: the demo prints what it could read.
      }
      received.push({ payload, signed: given.length === expected.length && timingSafeEqual(given, expected) });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/notifications`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
