import type { RouteDef } from './define.ts';

/** go-tfe calls this when a client is created and reads these headers; the status is ignored. */
export const metaRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/ping',
    auth: 'public',
    summary: 'Check the API is reachable (go-tfe reads the TFP-API-Version header)',
    response: { status: 204, content: 'none' },
    handler: async (ctx) => {
      ctx.set('TFP-API-Version', '2.6');
      ctx.set('X-RateLimit-Limit', '30');
      ctx.set('TFP-AppName', 'Run Tasks Service');
      ctx.status = 204;
    },
  },
];
