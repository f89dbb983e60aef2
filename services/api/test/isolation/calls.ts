import { expect } from '@jest/globals';
import { CALLBACK_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import { randomBytes } from 'node:crypto';
import { type Server } from 'node:http';
import { type RouteDef } from '../../src/routes/define.ts';
import { type Harness } from '../../../../test/support/harness.ts';
import { type Fixture, JSON_API } from '../../../../test/support/fixtures.ts';
import { type Response } from '../../../../test/support/assertions.ts';
import { MISSING, type Values } from './params.ts';
import { bodyOf, fill, paramsOf } from './routes.ts';

/** What the isolation tests share: filled in by beforeAll (see setup.ts), read only when tests run. */
export interface IsolationState {
  h: Harness;
  a: Fixture;
  b: Fixture;
  revokedToken: string;
  noPermissionTeamToken: string;
  grantedTeamId: string;
  real: Values;
  notFoundText: string;
  unauthorizedText: string;
  stateBefore: string;
  requestsSent: number;
  server: Server | undefined;
  taskRequestsBefore: number;
  /** A live access token of a task result in organization B. */
  otherTaskToken: string;
  /** A's team with every organization permission: still no site admin. */
  allAccessTeamToken: string;
  /** The token of A's team with read access to A's workspace (it may read runs, not plan them). */
  readTeamToken: string;
  allAccessTeamId: string;
  /** The archive uploaded to real.configuration_version_id. */
  archive: Buffer;
  /** Upload tokens that name no usable URL any more: an archived version's, and an expired one. */
  usedUploadToken: string;
  expiredUploadToken: string;
  /** The version whose upload URL (real.upload_token) the last tests use; pending until then. */
  pendingVersionId: string;
  /** Live access tokens of task results of A's runs: one on a run that uses the version, one on a run that does not. */
  versionTaskToken: string;
  plainTaskToken: string;
}

/** The calls the matrix makes and the checks it applies to their answers. */
export function isolationCalls(g: IsolationState) {
  /** Everything the failing requests must leave alone (api_tokens minus last_used_at bookkeeping). */
  async function snapshot(): Promise<string> {
    const connection = g.h.orm.em.fork().getConnection();
    const tables = [
      'organizations',
      'workspaces',
      'teams',
      'team_workspaces',
      'runs',
      'run_tasks',
      'workspace_tasks',
      'task_stages',
      'task_results',
      'task_result_outcomes',
      'delivery_attempts',
      'outbox_events',
      'configuration_versions',
      'run_comments',
      'run_events',
      'workspace_remote_state_consumers',
      'tags',
      'workspace_tags',
    ];
    const rows: string[] = [];
    for (const table of tables) {
      const [row] = await connection.execute<{ n: string; digest: string | null }[]>(
        `select count(*) as n, md5(string_agg(t::text, '|' order by t::text)) as digest from ${table} t`,
      );
      rows.push(`${table}: ${row?.n} ${row?.digest}`);
    }
    const [tokens] = await connection.execute<{ n: string; active: string; digest: string | null }[]>(
      `select count(*) as n, count(*) filter (where revoked_at is null) as active,
              md5(string_agg(concat_ws(',', id, kind, organization_id, team_id, revoked_at, expires_at), '|' order by id)) as digest
         from api_tokens`,
    );
    rows.push(`api_tokens: ${tokens?.n} ${tokens?.active} ${tokens?.digest}`);
    return rows.join('\n');
  }

  function call(route: RouteDef, values: Values, authorization?: string) {
    g.requestsSent += 1;
    let req = g.h.http[route.method.toLowerCase() as 'get' | 'post' | 'patch' | 'put' | 'delete'](`/api/v2${fill(route, values)}`);
    if (authorization !== undefined) req = req.set('Authorization', authorization);
    const body = bodyOf(route, values);
    if (body !== undefined) req = req.set('Content-Type', JSON_API).send(JSON.stringify(body));
    return req;
  }

  const uploadPath = (token: string): string => `/api/v2/uploads/configuration-versions/${token}`;

  /** A token-less PUT of bytes to an upload URL, as go-tfe sends it. */
  function upload(token: string, bytes: Buffer, authorization?: string) {
    g.requestsSent += 1;
    let req = g.h.http.put(uploadPath(token)).set('Content-Type', 'application/octet-stream');
    if (authorization !== undefined) req = req.set('Authorization', authorization);
    return req.send(bytes);
  }

  /** The download route's answer, its body as bytes (the archive) whatever the content type. */
  function download(id: string, authorization?: string) {
    g.requestsSent += 1;
    let req = g.h.http.get(`/api/v2/configuration-versions/${encodeURIComponent(id)}/download`);
    if (authorization !== undefined) req = req.set('Authorization', authorization);
    return req.buffer(true).parse((res, done) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => done(null, Buffer.concat(chunks)));
    });
  }

  /** A JSON:API answer's text from a download response (parsed as bytes above). */
  const textOf = (res: Response): string => (Buffer.isBuffer(res.body) ? res.body.toString('utf8') : res.text);

  /** Real values with one parameter (or, last, every parameter) replaced by a value nothing has. */
  function missingVariants(route: RouteDef): { label: string; values: Values }[] {
    const params = [...new Set(paramsOf(route))];
    const variants = params.map((param) => ({ label: `:${param} missing`, values: { ...g.real, [param]: MISSING[param] } }));
    if (params.length > 1) variants.push({ label: 'all missing', values: { ...MISSING } });
    return variants;
  }

  function expectNotFound(res: Response, context: string): void {
    expect({ context, status: res.status, text: res.text }).toEqual({ context, status: 404, text: g.notFoundText });
    expect(res.headers['content-type']).toContain(JSON_API);
  }

  function expectUnauthorized(res: Response, context: string): void {
    expect({ context, status: res.status, text: res.text }).toEqual({ context, status: 401, text: g.unauthorizedText });
    expect(res.headers['content-type']).toContain(JSON_API);
  }

  /** Nothing of A's beyond what the caller may see appears in an allowed answer. */
  function expectNoLeak(res: Response, hidden: string[]): void {
    for (const secret of hidden) expect(res.text).not.toContain(secret);
  }

  const garbage = (): [string, string][] => [
    ['garbage bearer token', `Bearer rtk_${randomBytes(32).toString('base64url')}`],
    ['garbage token without the prefix', `Bearer ${randomBytes(32).toString('base64url')}`],
    ['garbage task access token', `Bearer ${generateToken(CALLBACK_TOKEN_PREFIX)}`],
    ['basic credentials', `Basic ${Buffer.from('admin:admin').toString('base64')}`],
    ["A's real token under another scheme", `Token ${g.a.organizationToken}`],
    ["A's real token without a scheme", g.a.organizationToken],
    ['empty bearer', 'Bearer '],
    ["B's revoked token", `Bearer ${g.revokedToken}`],
  ];
  return {
    snapshot,
    call,
    uploadPath,
    upload,
    download,
    textOf,
    missingVariants,
    expectNotFound,
    expectUnauthorized,
    expectNoLeak,
    garbage,
  };
}
