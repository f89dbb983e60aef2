import { SERVICE_VERSION } from '../cli-download/route.ts';
import type { RouteDef } from './define.ts';

/**
 * The Terraform Enterprise release this API answers as, in TFE's `vYYYYMM-N` form, sent as
 * `X-TFE-Version` on /ping. go-tfe keeps it as `RemoteTFEVersion()`, and the Terraform provider gates
 * features on it: `tfe_workspace_run_task` calls `MeetsMinRemoteTFEVersion("v202404-1")` and, with no
 * or an older version, rejects a `stages` list of two or more entries and falls back to the deprecated
 * single `stage`. v202507-1 is at or above that minimum; raise it (never lower it) when a client check
 * we must pass asks for a later release.
 */
export const TFE_VERSION = 'v202507-1';

/** go-tfe calls this when a client is created and reads these headers; the status is ignored. */
export const metaRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/ping',
    auth: 'public',
    summary:
      'Check the API is reachable (go-tfe reads TFP-API-Version, X-TFE-Version, TFP-AppName and X-RateLimit-Limit; the runtasks CLI reads X-Runtasks-Version)',
    response: { status: 204, content: 'none' },
    handler: async (ctx) => {
      ctx.set('TFP-API-Version', '2.6');
      ctx.set('X-TFE-Version', TFE_VERSION);
      // Not "HCP Terraform": go-tfe's IsCloud() would then skip version checks and assume cloud-only behaviour.
      ctx.set('TFP-AppName', 'Run Tasks Service');
      // Only this service sends it: the runtasks CLI reads it before it sends a token found in TFE_TOKEN
      // (HCP Terraform answers /ping with the same TFP-API-Version), and prints it with --version.
      ctx.set('X-Runtasks-Version', SERVICE_VERSION);
      // X-RateLimit-Limit, which go-tfe throttles itself by (2/3 of it per second, tfe.go configureLimiter),
      // is the rate limiter's to send, as on every route: the limit it enforces, and none where it enforces
      // none (go-tfe reads a missing value as "no limit").
      ctx.status = 204;
    },
  },
];
