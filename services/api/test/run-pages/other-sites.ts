import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OtherSite {
  /** Its origin: `http://localhost:<port>` (another site than the service's 127.0.0.1) or `http://127.0.0.1:<port>` (the same site, another origin). */
  origin: string;
  close(): Promise<void>;
}

/**
 * Another site a person visits while signed in to the pages: a chat client with a run's link in it,
 * or an attacker's page. `sameSite`: served from the service's own host on another port (a sibling
 * origin of the same site, as a neighbouring subdomain is in production).
 */
export async function startOtherSite(
  sameSite: boolean,
  respond: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>,
): Promise<OtherSite> {
  const server = createServer((req, res) => void respond(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://${sameSite ? '127.0.0.1' : 'localhost'}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A page that posts a form to `action` as soon as it loads, as an attacker's page would. */
export const autoSubmitting = (action: string, fields: Record<string, string>): string =>
  `<!doctype html><title>Win a prize</title><form method="post" action="${action}">${Object.entries(fields)
    .map(([name, value]) => `<input type="hidden" name="${name}" value="${value}">`)
    .join('')}</form><script>document.forms[0].submit()</script>`;
