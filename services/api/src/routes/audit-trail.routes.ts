import { invalidParameter } from '@runtasks/shared/errors';
import { poolOf, type ApiContext } from '../context.ts';
import { pageParameter } from '../http/pagination.ts';
import { auditTrailPage } from '../services/audit-trail.service.ts';
import type { RouteDef } from './define.ts';

/** HCP's page size for the audit trail, and the most it serves at once. */
const AUDIT_PAGE_SIZE = 1000;

function parseSince(raw: string | string[] | undefined): Date | null {
  if (raw === undefined || raw === '') return null;
  if (Array.isArray(raw)) throw invalidParameter('since', 'since must be given at most once.');
  // ISO 8601 with a zone (go-tfe sends the client's local offset): anything Date reads without one is refused.
  const at = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i.test(raw) ? new Date(raw) : null;
  if (!at || Number.isNaN(at.getTime()))
    throw invalidParameter('since', 'since must be an ISO 8601 time with a zone, e.g. 2026-11-29T10:00:00Z.');
  return at;
}

/**
 * `GET /organization/audit-trail`, as HCP has it: not JSON:API; the organization is the token's; events
 * after `since`, oldest first, 1000 a page unless `page[size]` says fewer.
 */
async function list(ctx: ApiContext): Promise<void> {
  const since = parseSince(ctx.query['since']);
  const size = pageParameter(ctx.query, 'page[size]', AUDIT_PAGE_SIZE, AUDIT_PAGE_SIZE);
  const number = pageParameter(ctx.query, 'page[number]', 1, Number.MAX_SAFE_INTEGER);
  const organizationId = ctx.state.auditTrailOrganizationId ?? '';
  const { events, total } = await auditTrailPage(await poolOf(ctx), organizationId, since, { size, number, offset: (number - 1) * size });
  const totalPages = Math.max(1, Math.ceil(total / size));
  ctx.status = 200;
  ctx.type = 'application/json';
  ctx.body = {
    data: events,
    pagination: {
      current_page: number,
      prev_page: number > 1 ? Math.min(number - 1, totalPages) : null,
      next_page: number < totalPages ? number + 1 : null,
      total_pages: totalPages,
      total_count: total,
    },
  };
}

export const auditTrailRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/organization/audit-trail',
    auth: 'audit-trail',
    summary: "Read the organization's audit trail (with its audit trail token, or the organization token)",
    notes:
      'Not JSON:API, as in HCP: {data: [events], pagination: {current_page, prev_page, next_page, total_pages, total_count}}. `since` (ISO 8601) keeps the events after it; page[size] defaults to 1000.',
    query: { page: true, params: ['since'] },
    response: { status: 200, content: 'json' },
    handler: list,
  },
];
