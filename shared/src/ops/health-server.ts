import { createServer, type Server } from 'node:http';
import type { Metrics } from './metrics.ts';
import { checkReadiness, type ReadinessCheck } from './readiness.ts';

export interface HealthServerOptions {
  host: string;
  port: number;
  metrics: Metrics;
  checks: Record<string, ReadinessCheck>;
  isDraining: () => boolean;
}

/** `/healthz`, `/readyz` and `/metrics` for a process without an HTTP API (the worker). */
export async function startHealthServer(options: HealthServerOptions): Promise<Server> {
  const server = createServer((req, res) => {
    void (async () => {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/healthz') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok' }));
      } else if (path === '/readyz') {
        const report = await checkReadiness(options.checks, options.isDraining());
        res.writeHead(report.ready ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(report));
      } else if (path === '/metrics') {
        res.writeHead(200, { 'content-type': options.metrics.registry.contentType }).end(await options.metrics.registry.metrics());
      } else {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'not found' }));
      }
    })().catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, resolve);
  });
  return server;
}
