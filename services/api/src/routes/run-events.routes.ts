import type { ApiContext } from '../context.ts';
import { parseInclude } from '../http/include.ts';
import { single, uniqueResources, type Document, type Resource } from '../http/jsonapi.ts';
import { serializeComment } from '../serializers/comment.serializer.ts';
import { serializeRunEvent } from '../serializers/run-event.serializer.ts';
import { poolOf } from '../context.ts';
import { findRun } from '../services/run-lookup.service.ts';
import { findRunEvent, runEvents, type RunEventView } from '../services/run-event.service.ts';
import { includedActors } from './actor-includes.ts';
import { respond, type RouteDef } from './define.ts';

/**
 * Run events, as HCP Terraform has them (undocumented; go-tfe's RunEvents): who did what to a run, and
 * what they said. Reading takes reading the run. HCP does not paginate the list: a run holds few events.
 */

const RUN_EVENT_INCLUDES = ['actor', 'comment'] as const;
type RunEventInclude = (typeof RUN_EVENT_INCLUDES)[number];

async function included(ctx: ApiContext, events: readonly RunEventView[], include: ReadonlySet<RunEventInclude>): Promise<Resource[]> {
  const actors = include.has('actor')
    ? await includedActors(
        ctx,
        events.map((event) => event.actorId),
      )
    : [];
  const comments = include.has('comment')
    ? events.flatMap((event) => (event.comment ? [serializeComment({ ...event.comment, run: { id: event.runId } })] : []))
    : [];
  return uniqueResources([...actors, ...comments]);
}

async function list(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, RUN_EVENT_INCLUDES);
  const run = await findRun(ctx, 'runs:read', { id: ctx.params['run_id'] ?? '' });
  const events = await runEvents(await poolOf(ctx), run.id);
  const document: Document = { data: events.map(serializeRunEvent) };
  const resources = await included(ctx, events, include);
  if (resources.length > 0) document.included = resources;
  respond(ctx, 200, document);
}

async function show(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, RUN_EVENT_INCLUDES);
  const event = await findRunEvent(ctx, ctx.params['run_event_id'] ?? '');
  respond(ctx, 200, single(serializeRunEvent(event), await included(ctx, [event], include)));
}

export const runEventRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/runs/:run_id/run-events',
    auth: 'token',
    summary: "List a run's events: who did what, and what they said",
    notes: 'Not paginated, as in HCP: a run holds few events. Oldest first.',
    query: { include: RUN_EVENT_INCLUDES },
    handler: list,
  },
  {
    method: 'GET',
    path: '/run-events/:run_event_id',
    auth: 'token',
    summary: 'Show a run event',
    query: { include: RUN_EVENT_INCLUDES },
    handler: show,
  },
];
