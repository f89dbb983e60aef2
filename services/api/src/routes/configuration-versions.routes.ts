import type { FilterQuery } from '@mikro-orm/core';
import { ApiError, conflict, notFound } from '@runtasks/shared/errors';
import { newId, queueStateAtCreation } from '@runtasks/shared/domain';
import { ConfigurationVersion, inTransaction, nativePool, Run } from '@runtasks/shared/db';
import { admitAfterChange, resultDeadlines } from '@runtasks/shared/engine';
import { generateToken, isPlausibleToken, issueCallbackToken } from '@runtasks/shared/security';
import { z } from 'zod';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeConfigurationVersion } from '../serializers/configuration-version.serializer.ts';
import { receiveArchive } from '../services/archive-upload.service.ts';
import { storeUpload } from '../services/configuration-version.service.ts';
import { discardObjects, removedByRetention, sendObject } from '../services/stored-object.service.ts';
import { isGlobalEntitled } from '../services/run-task.service.ts';
import { createRunIn } from '../services/run.service.ts';
import { boundedDownload } from '../ops/download-slots.ts';
import { configurationVersionActionRoutes } from './configuration-version-actions.ts';
import { orNotFound, publicRequestUrl, respond, type RouteDef } from './define.ts';
import { flexibleBoolean } from './schemas.ts';
import { findWorkspace } from '../services/workspace.service.ts';
import { findVersion } from '../services/configuration-version-lookup.ts';

const UPLOAD_TOKEN_PREFIX = 'rtup_';

const createSchema = z.object({
  data: z.object({
    type: z.literal('configuration-versions'),
    attributes: z
      .object({
        'auto-queue-runs': flexibleBoolean.optional(),
        speculative: flexibleBoolean.optional(),
        provisional: flexibleBoolean.optional(),
      })
      .default({}),
  }),
});

/**
 * No body (the parser gives `{}`), or a document. Not a zod union with `undefined`: a union reports
 * every failure at "" (hiding the offending attribute's pointer) and never matched the parser's `{}`.
 */
function parseCreateAttributes(body: unknown): z.output<typeof createSchema>['data']['attributes'] {
  const empty = body === undefined || (typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0);
  return empty ? {} : parseWith(createSchema, body).data.attributes;
}

async function create(ctx: ApiContext): Promise<void> {
  const workspace = await findWorkspace(ctx, 'runs:plan', { id: ctx.params['workspace_id'] ?? '' }, 'upload configuration versions to it');
  const attributes = parseCreateAttributes(ctx.request.body);
  const token = generateToken(UPLOAD_TOKEN_PREFIX);
  const version = ctx.state.em.create(ConfigurationVersion, {
    id: newId('configurationVersion'),
    workspace,
    status: 'pending',
    autoQueueRuns: attributes['auto-queue-runs'] ?? true,
    speculative: attributes.speculative ?? false,
    provisional: attributes.provisional ?? false,
    uploadTokenHash: ctx.deps.secrets.hashToken(token),
    uploadExpiresAt: new Date(Date.now() + ctx.deps.config.configurationUploadUrlTtlSeconds * 1000),
  });
  await ctx.state.em.flush();
  const uploadUrl = `${ctx.deps.config.publicBaseUrl}/api/v2/uploads/configuration-versions/${token}`;
  respond(ctx, 201, single(serializeConfigurationVersion(version, uploadUrl)));
}

/**
 * `PUT` of the archive to the upload URL, without a token (as go-tfe does): the URL's own secret
 * authorizes it until it expires (wrong and expired URLs are the same 404). A later upload replaces the
 * archive, as HCP's upload URLs allow, until a run uses the version (then 409: a run's configuration
 * never changes under it) or it is archived (404).
 */
async function upload(ctx: ApiContext): Promise<void> {
  const token = ctx.params['upload_token'] ?? '';
  if (!isPlausibleToken(token)) throw notFound();
  const em = ctx.state.em;
  const where = {
    uploadTokenHash: ctx.deps.secrets.hashToken(token),
    status: { $in: ['pending', 'uploaded', 'errored'] },
    uploadExpiresAt: { $gt: new Date() },
  } as FilterQuery<ConfigurationVersion>;
  const version = orNotFound(await em.findOne(ConfigurationVersion, where, { populate: ['workspace', 'workspace.organization'] }));
  const { check, archive } = await receiveArchive(ctx, version);
  // An archive that is none is not kept (an errored version keeps no archive).
  if (!check.ok) await discardObjects(ctx, [archive.key]);
  if (!check.ok && !check.errored) throw new ApiError(check.status, 'invalid archive', check.detail);
  const status = check.ok ? 'uploaded' : 'errored';
  const kept = check.ok ? archive.key : null;
  const replaced: { key: string | null } = { key: null };
  const queued = await inTransaction(await nativePool(em), async (client) => {
    const stored = await storeUpload(client, version.id, {
      status,
      errorMessage: check.ok ? null : check.detail,
      archiveKey: kept,
      size: archive.size,
    });
    // A run uses the version (an earlier upload queued it, or one was created on it) or it was archived meanwhile.
    if (!stored) throw versionInUse();
    replaced.key = stored.replacedKey;
    if (!check.ok || !version.autoQueueRuns) return undefined;
    const organization = version.workspace.organization;
    const place = {
      workspaceId: version.workspace.id,
      organizationId: organization.id,
      globalEntitled: isGlobalEntitled(organization),
      executionMode: version.workspace.executionMode,
    };
    return createRunIn(
      client,
      place,
      {
        message: 'Triggered via API',
        planOnly: version.speculative,
        isDestroy: false,
        autoApply: version.workspace.autoApply,
        planJson: null,
        configurationVersionId: version.id,
        createdBy: null,
        options: { source: 'tfe-configuration-version', terraformVersion: version.workspace.terraformVersion },
        // Inside the upload's transaction: it waits in the queue, and is admitted once that has committed.
        queue: queueStateAtCreation({ planOnly: version.speculative }, { busy: true }),
      },
      (resultId) => issueCallbackToken(ctx.deps.secrets, resultId),
      resultDeadlines(ctx.deps.config),
    );
  }).catch(async (error: unknown) => {
    await discardObjects(ctx, [kept]);
    throw error;
  });
  // The archive this upload replaced.
  await discardObjects(ctx, [replaced.key]);
  // Committed: the auto-queued run's job goes to the workers now, as a created run's does.
  if (queued) ctx.deps.ops?.publishRunCreated?.(queued);
  if (queued) await admitAfterChange(await nativePool(em), version.workspace.id, version.speculative ? null : 'queued');
  if (!check.ok) throw new ApiError(check.status, 'invalid archive', check.detail);
  respond(ctx, 200);
}

const versionInUse = (): ApiError =>
  conflict('A run uses this configuration version, so its archive can no longer change: create a new configuration version.');

async function show(ctx: ApiContext): Promise<void> {
  respond(ctx, 200, single(serializeConfigurationVersion(await findVersion(ctx))));
}

async function list(ctx: ApiContext): Promise<void> {
  const workspace = await findWorkspace(ctx, 'runs:read', { id: ctx.params['workspace_id'] ?? '' });
  const page = parsePage(ctx.query);
  const [versions, total] = await ctx.state.em.findAndCount(
    ConfigurationVersion,
    { workspace: workspace.id },
    { orderBy: { createdAt: 'desc', id: 'desc' }, limit: page.size, offset: page.offset },
  );
  respond(
    ctx,
    200,
    collection(
      versions.map((version) => serializeConfigurationVersion(version)),
      page,
      total,
      publicRequestUrl(ctx),
    ),
  );
}

/** The archive, for API tokens with read access or a task result's access token of a run that uses it. */
async function download(ctx: ApiContext): Promise<void> {
  const id = ctx.params['configuration_version_id'] ?? '';
  const access = ctx.state.taskAccess;
  if (access) {
    const run = await ctx.state.em.findOne(Run, { id: access.runId, configurationVersionId: id }, { fields: ['id'] });
    orNotFound(run);
  }
  const version = access ? orNotFound(await ctx.state.em.findOne(ConfigurationVersion, { id })) : await findVersion(ctx);
  if (version.status !== 'uploaded') throw notFound();
  const key = version.archive?.key;
  ctx.set('Content-Disposition', `attachment; filename="${version.id}.tar.gz"`);
  if (!key || !(await sendObject(ctx, key, 'application/octet-stream'))) {
    ctx.remove('Content-Disposition');
    throw removedByRetention("The configuration version's archive");
  }
}

export const configurationVersionRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/workspaces/:workspace_id/configuration-versions',
    auth: 'token',
    summary: 'Create a configuration version and its upload URL',
    requestSchema: createSchema,
    optionalBody: true,
    handler: create,
  },
  {
    method: 'GET',
    path: '/workspaces/:workspace_id/configuration-versions',
    auth: 'token',
    summary: "List a workspace's configuration versions",
    query: { page: true },
    handler: list,
  },
  {
    method: 'GET',
    path: '/configuration-versions/:configuration_version_id',
    auth: 'token',
    summary: 'Show a configuration version',
    handler: show,
  },
  {
    method: 'GET',
    path: '/configuration-versions/:configuration_version_id/download',
    auth: 'token-or-task',
    summary: "Download a configuration version's archive (.tar.gz)",
    response: { status: 200, content: 'binary' },
    handler: boundedDownload(download),
  },
  {
    method: 'PUT',
    path: '/uploads/configuration-versions/:upload_token',
    auth: 'public',
    body: 'raw',
    summary: 'Upload the configuration archive (.tar.gz) to its one-time upload URL',
    response: { status: 200, content: 'none' },
    handler: upload,
  },
  ...configurationVersionActionRoutes,
];
