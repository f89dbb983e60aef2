import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The notification destination of `--notifications`: a webhook on loopback that answers 200 to every
 * POST and counts them. It runs in the harness's own process (its CPU is the harness's, not the
 * service's), as a destination elsewhere would cost the service nothing but the request.
 */
export interface CountingReceiver {
  url: string;
  count(): number;
  close(): Promise<void>;
}

export async function startCountingReceiver(): Promise<CountingReceiver> {
  let received = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received += 1;
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    count: () => received,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
