import { z } from 'zod';
import { actorId } from '../auth/actor.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeComment } from '../serializers/comment.serializer.ts';
import { findRun } from '../services/run-lookup.service.ts';
import { addRunComment, findComment, runComments } from '../services/run-comment.service.ts';
import { publicRequestUrl, respond, type RouteDef } from './define.ts';
import { COMMENT_MAX, noRelationships, resourceDocument, safeText } from './schemas.ts';

/**
 * Run comments, as HCP Terraform has them. Reading takes reading the run; writing takes queueing plans
 * in its workspace (`runs:plan`): whoever may start a run there may discuss one, and commenting changes
 * nothing a run does. The comments given to run actions and stage overrides land here too.
 */

const createSchema = resourceDocument('comments', z.object({ body: safeText(COMMENT_MAX).min(1, 'must not be empty') }), noRelationships);

const runId = (ctx: ApiContext) => ({ id: ctx.params['run_id'] ?? '' });

async function list(ctx: ApiContext): Promise<void> {
  const run = await findRun(ctx, 'runs:read', runId(ctx));
  const page = parsePage(ctx.query);
  // A run holds few comments: read whole, paginated in memory.
  const comments = await runComments(ctx.state.em, run.id);
  const data = comments.slice(page.offset, page.offset + page.size).map(serializeComment);
  respond(ctx, 200, collection(data, page, comments.length, publicRequestUrl(ctx)));
}

async function create(ctx: ApiContext): Promise<void> {
  const { attributes } = parseWith(createSchema, ctx.request.body).data;
  const run = await findRun(ctx, 'runs:plan', runId(ctx), 'comment on it');
  const comment = await addRunComment(ctx.state.em, run.id, attributes.body, actorId(ctx.state.principal));
  respond(ctx, 201, single(serializeComment(comment)));
}

async function show(ctx: ApiContext): Promise<void> {
  const comment = await findComment(ctx, ctx.params['comment_id'] ?? '');
  respond(ctx, 200, single(serializeComment(comment)));
}

export const runCommentRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/runs/:run_id/comments',
    auth: 'token',
    summary: "List a run's comments",
    query: { page: true },
    handler: list,
  },
  {
    method: 'POST',
    path: '/runs/:run_id/comments',
    auth: 'token',
    summary: 'Comment on a run',
    notes: "Takes the permission to queue plans in the run's workspace.",
    requestSchema: createSchema,
    handler: create,
  },
  {
    method: 'GET',
    path: '/comments/:comment_id',
    auth: 'token',
    summary: 'Show a comment',
    handler: show,
  },
];
