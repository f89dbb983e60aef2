import { Workspace } from '@runtasks/shared/db';
import { z } from 'zod';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { changeConsumers, consumerPage, type ConsumerChange } from '../services/remote-state-consumer.service.ts';
import { findWorkspace } from '../services/workspace.service.ts';
import { publicRequestUrl, respond, type RouteDef } from './define.ts';
import { identifier } from './schemas.ts';
import { workspaceDocuments } from './workspace-documents.ts';

/**
 * A workspace's remote state consumers (rules in services/remote-state-consumer.service.ts). Reading them
 * takes reading the workspace; changing them takes what updating its settings takes.
 */

// `{"data": [{"type": "workspaces", "id": …}, …]}`: at least one, as go-tfe requires before sending.
const consumersSchema = z.object({
  data: z.array(identifier('workspaces'), 'must be a list of workspaces').min(1, 'must name at least one workspace'),
});

const PATH = '/workspaces/:workspace_id/relationships/remote-state-consumers';
const byId = (ctx: ApiContext) => ({ id: ctx.params['workspace_id'] ?? '' });

async function list(ctx: ApiContext): Promise<void> {
  const page = parsePage(ctx.query);
  const workspace = await findWorkspace(ctx, 'read', byId(ctx));
  const { ids, total } = await consumerPage(await poolOf(ctx), ctx.state.principal, workspace, page);
  const loaded = await ctx.state.em.find(Workspace, { id: { $in: ids } }, { populate: ['organization'] });
  const workspaces = ids.flatMap((id) => loaded.filter((candidate) => candidate.id === id));
  const { data } = await workspaceDocuments(ctx, workspaces);
  respond(ctx, 200, collection(data, page, total, publicRequestUrl(ctx)));
}

function changeWith(change: ConsumerChange) {
  return async (ctx: ApiContext): Promise<void> => {
    // The workspace first: a body sent to a workspace the caller may not change is never looked at.
    const workspace = await findWorkspace(ctx, 'manage', byId(ctx));
    const { data } = parseWith(consumersSchema, ctx.request.body);
    await changeConsumers(
      await poolOf(ctx),
      workspace.id,
      data.map((item) => item.id),
      change,
    );
    respond(ctx, 204);
  };
}

const RULES =
  "Only while the workspace's `global-remote-state` is false (else 422). Each id must name a workspace of the same organization (else 422 at `/data/N/id`); an empty list is a 422 at `/data`.";

export const remoteStateConsumerRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: PATH,
    auth: 'token',
    summary: "List a workspace's remote state consumers",
    notes:
      'Workspace documents, by name, only those the caller may read. With `global-remote-state` true, every other workspace of the organization.',
    query: { page: true },
    handler: list,
  },
  {
    method: 'POST',
    path: PATH,
    auth: 'token',
    summary: 'Add remote state consumers',
    notes: `${RULES} A workspace already there is kept; a workspace cannot consume its own state (422).`,
    requestSchema: consumersSchema,
    response: { status: 204, content: 'none' },
    handler: changeWith('add'),
  },
  {
    method: 'DELETE',
    path: PATH,
    auth: 'token',
    summary: 'Remove remote state consumers',
    notes: `${RULES} A workspace that is not a consumer is ignored.`,
    requestSchema: consumersSchema,
    response: { status: 204, content: 'none' },
    handler: changeWith('remove'),
  },
  {
    method: 'PATCH',
    path: PATH,
    auth: 'token',
    summary: 'Replace the remote state consumers',
    notes: `${RULES} The consumers become exactly the listed workspaces; a workspace cannot consume its own state (422).`,
    requestSchema: consumersSchema,
    response: { status: 204, content: 'none' },
    handler: changeWith('replace'),
  },
];
