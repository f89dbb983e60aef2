import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A task server that answers every request 200 and does nothing else: its tasks pass verification at
 * creation, and where no worker runs nothing more is ever sent to it.
 */
export async function startAcknowledgingServer(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
