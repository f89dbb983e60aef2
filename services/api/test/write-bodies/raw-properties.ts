import { describe, expect, it } from '@jest/globals';
import { Run } from '@runtasks/shared/db';
import fc from 'fast-check';
import { type IncomingHttpHeaders, type OutgoingHttpHeaders, request as httpRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import { api, createRun, JSON_API } from '../../../../test/support/fixtures.ts';
import { RUNS } from './model.ts';
import { describeResponse, expectPrototypesUntouched } from './hostile.ts';
import { MAX_PLAN_REPORT_BYTES, MAX_UPLOAD_BYTES, noiseOf, tarGz, tarLists, type Upload, uploadContentTypes, uploads } from './uploads.ts';
import { type WriteContext } from './fixtures.ts';

/** Properties 6 and 7, over the routes whose body is bytes. */
export function describeRawProperties(ctx: WriteContext): void {
  const em = () => ctx.h.orm.em.fork();
  describe('6. raw uploads: arbitrary bytes to a fresh upload URL', () => {
    interface RawResponse {
      status: number;
      headers: IncomingHttpHeaders;
      text: string;
    }

    /** A PUT with no Authorization header (as go-tfe sends it), with a Content-Length or chunked. */
    const rawPut = (path: string, bytes: Buffer, contentType: string | null, chunked: boolean): Promise<RawResponse> =>
      new Promise((resolve, reject) => {
        const headers: OutgoingHttpHeaders = {};
        if (contentType !== null) headers['content-type'] = contentType;
        if (!chunked) headers['content-length'] = bytes.length;
        let answered = false;
        const req = httpRequest(`${ctx.h.baseUrl}${path}`, { method: 'PUT', headers }, (res) => {
          answered = true;
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        });
        // A server answering before it read everything (413) may close the connection under the writer.
        req.on('error', (error) => {
          if (!answered) reject(error);
        });
        if (chunked) {
          const half = Math.floor(bytes.length / 2);
          req.write(bytes.subarray(0, half));
          req.end(bytes.subarray(half));
        } else {
          req.end(bytes);
        }
      });

    const createVersion = async (autoQueueRuns: boolean): Promise<{ id: string; path: string }> => {
      const res = await api(ctx.h, 'post', `/workspaces/${ctx.wsVersions}/configuration-versions`, ctx.h.adminToken, {
        data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': autoQueueRuns } },
      });
      if (res.status !== 201) throw new Error(`create a configuration version: ${describeResponse(res)}`);
      return { id: res.body.data.id as string, path: new URL(String(res.body.data.attributes['upload-url'])).pathname };
    };
    const statusOf = async (id: string): Promise<string> =>
      (await api(ctx.h, 'get', `/configuration-versions/${id}`, ctx.h.adminToken)).body.data.attributes.status as string;
    const runsOn = async (id: string): Promise<number> => {
      const [row] = await em()
        .getConnection()
        .execute<{ n: string }[]>('select count(*) as n from runs where configuration_version_id = ?', [id]);
      return Number(row?.n);
    };
    const downloadOf = (id: string) =>
      ctx.h.http
        .get(`/api/v2/configuration-versions/${id}/download`)
        .set('Authorization', `Bearer ${ctx.h.adminToken}`)
        .buffer(true)
        .parse((res, done) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => done(null, Buffer.concat(chunks)));
        });

    /** Every answer the upload route may give; a 5xx (or anything else) fails the property. */
    const ANSWERS = [200, 404, 413, 422];

    it('never a 5xx; `uploaded` only for a real .tar.gz; a failed upload leaves the version pending or errored', async () => {
      const followUp = tarGz('resource "null_resource" "follow-up" {}\n');
      const seen = new Set<string>();
      const example = (kind: string, bytes: Buffer, real = false): Upload => ({ kind, bytes, real });
      await fc.assert(
        fc.asyncProperty(uploads, uploadContentTypes, fc.boolean(), fc.boolean(), async (upload, contentType, chunked, autoQueueRuns) => {
          const { bytes } = upload;
          const context = `${upload.kind} (${bytes.length} bytes, Content-Type ${JSON.stringify(contentType)}${chunked ? ', chunked' : ''})`;
          const version = await createVersion(autoQueueRuns);
          const res = await rawPut(version.path, bytes, contentType, chunked);
          if (!ANSWERS.includes(res.status)) throw new Error(`${context} → ${res.status} ${res.text.slice(0, 300)}`);
          if (res.status >= 400) {
            const first = (JSON.parse(res.text) as { errors?: { status?: string; title?: unknown }[] }).errors?.[0];
            if (
              !String(res.headers['content-type']).includes(JSON_API) ||
              first?.status !== String(res.status) ||
              typeof first.title !== 'string'
            )
              throw new Error(`${context}: not a JSON:API error document: ${res.headers['content-type']} ${res.text.slice(0, 300)}`);
          } else {
            expect(res.text).toBe('');
          }
          expectPrototypesUntouched(context);

          const status = await statusOf(version.id);
          seen.add(`${res.status} ${status}`);
          const outcome = { context, answer: res.status, status };
          if (bytes.length > MAX_UPLOAD_BYTES) {
            // Too large: refused before anything is stored, and the URL stays usable.
            expect(outcome).toEqual({ ...outcome, answer: 413, status: 'pending' });
          } else if (res.status === 200) {
            expect(outcome).toEqual({ ...outcome, status: 'uploaded' });
          } else {
            // A fresh URL is never a 404; not gzip at all leaves the version pending, broken gzip marks it errored.
            const gzipped = bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
            expect(outcome).toEqual({ ...outcome, answer: 422, status: gzipped ? 'errored' : 'pending' });
            if (upload.real) throw new Error(`${context}: a real archive was refused: ${res.text.slice(0, 300)}`);
          }
          if (status === 'uploaded') {
            if (!tarLists(bytes)) throw new Error(`${context}: uploaded, but the system's tar cannot list it`);
            const downloaded = await downloadOf(version.id);
            expect(downloaded.status).toBe(200);
            expect(Buffer.compare(downloaded.body as Buffer, bytes)).toBe(0);
          }
          // A run is queued only for an archive that arrived, and only when asked to.
          expect({ context, runs: await runsOn(version.id) }).toEqual({ context, runs: status === 'uploaded' && autoQueueRuns ? 1 : 0 });
          // The URL works again (replacing the archive) until a run uses the version: then a 409.
          const again = await rawPut(version.path, followUp, 'application/octet-stream', false);
          if (status === 'uploaded' && autoQueueRuns) {
            expect({
              context,
              again: again.status,
              title: (JSON.parse(again.text) as { errors?: { title?: string }[] }).errors?.[0]?.title,
            }).toEqual({
              context,
              again: 409,
              title: 'conflict',
            });
          } else {
            expect({ context, again: again.status }).toEqual({ context, again: 200 });
          }
        }),
        {
          numRuns: RUNS.uploads,
          // Every outcome at least once, whatever fc draws.
          examples: [
            [example('a real archive', tarGz('resource "null_resource" "x" {}\n'), true), 'application/octet-stream', false, true],
            [example('random bytes, one too many', noiseOf(1, MAX_UPLOAD_BYTES + 1)), 'application/octet-stream', false, false],
            [example('random bytes, one too many', noiseOf(2, MAX_UPLOAD_BYTES + 1)), null, true, false],
            [example('random bytes, at the limit', noiseOf(3, MAX_UPLOAD_BYTES)), 'application/gzip', true, false],
            [example('plain text', Buffer.from('plain text, not an archive')), 'text/plain', false, false],
            [example('nothing', Buffer.alloc(0)), null, false, true],
            [example('gzip of random bytes', gzipSync(noiseOf(4, 100))), 'application/json', false, true],
            [example('gzip of 4 MiB of zeros', gzipSync(Buffer.alloc(4 * 1024 * 1024))), 'application/x-gzip', false, false],
          ],
        },
      );
      expect([...seen].sort()).toEqual(expect.arrayContaining(['200 uploaded', '413 pending', '422 errored', '422 pending']));
    }, 120_000);
  });
  describe('7. plan reports: arbitrary bodies to a local run waiting at planning', () => {
    /** A resource change with these actions, as `terraform show -json` writes one. */
    const resourceChange = fc.record({
      actions: fc.constantFrom<string[]>(
        ['create'],
        ['update'],
        ['delete'],
        ['delete', 'create'],
        ['create', 'delete'],
        ['no-op'],
        ['read'],
      ),
      data: fc.boolean(),
      importing: fc.boolean(),
    });
    /** A real plan document, with the counts HCP gives it (written here independently of the service's reading). */
    const plans = fc
      .record({ changes: fc.array(resourceChange, { maxLength: 8 }), padding: fc.nat({ max: 2 * MAX_PLAN_REPORT_BYTES }) })
      .map(({ changes, padding }) => {
        const managed = changes.filter((change) => !change.data);
        const has = (action: string) => managed.filter((change) => change.actions.includes(action)).length;
        const counts = {
          additions: has('create'),
          changes: has('update'),
          destructions: has('delete'),
          imports: managed.filter((change) => change.importing).length,
        };
        const document = {
          format_version: '1.2',
          planned_values: { root_module: {} },
          resource_changes: changes.map((change, index) => ({
            address: `${change.data ? 'data.' : ''}null_resource.r${index}`,
            mode: change.data ? 'data' : 'managed',
            change: { actions: change.actions, ...(change.importing ? { importing: { id: `i-${index}` } } : {}) },
          })),
          padding: 'x'.repeat(padding),
        };
        return { kind: 'plan' as const, text: JSON.stringify(document), counts };
      });
    /** Anything else: JSON that is no plan, broken JSON, hostile documents. */
    const others = fc.oneof(
      fc.jsonValue().map((value) => ({ kind: 'json' as const, text: JSON.stringify(value) ?? 'null' })),
      fc.string({ maxLength: 200 }).map((text) => ({ kind: 'text' as const, text })),
      fc.constantFrom(
        { kind: 'hostile' as const, text: '{"__proto__":{"polluted":1},"format_version":"1.2","resource_changes":[]}' },
        { kind: 'hostile' as const, text: '{"format_version":"1.2","resource_changes":[{"change":{"actions":["create"]},"x":"\\u0000"}]}' },
        { kind: 'hostile' as const, text: '{"format_version":"1.2","configuration":"\\ud800"}' },
        { kind: 'hostile' as const, text: `${'['.repeat(600)}${']'.repeat(600)}` },
        { kind: 'hostile' as const, text: `{"format_version":"1.2","planned_values":${'{"a":'.repeat(600)}1${'}'.repeat(600)}}` },
      ),
    );
    const contentTypes = fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'application/vnd.api+json',
      'text/plain',
      null,
    );
    const ANSWERS = [200, 400, 413, 415, 422];

    it('never a 5xx; a real plan within the limit moves the run to planned with its counts, anything else changes nothing', async () => {
      const seen = new Set<number>();
      await fc.assert(
        fc.asyncProperty(fc.oneof(plans, others), contentTypes, fc.boolean(), async (body, contentType, byRun) => {
          const runId = await createRun(ctx.h, ctx.h.adminToken, ctx.wsPlanReports);
          await em().nativeUpdate(Run, { id: runId }, { status: 'planning' });
          const run = await em().findOneOrFail(Run, { id: runId });
          const path = byRun ? `/api/v2/runs/${runId}/plan/json-output` : `/api/v2/plans/${run.planId}/json-output`;
          let req = ctx.h.http.put(path).set('Authorization', `Bearer ${ctx.h.adminToken}`);
          if (contentType !== null) req = req.set('Content-Type', contentType);
          const res = await req.send(body.text);
          const context = `${body.kind} (${body.text.length} bytes, ${String(contentType)}): ${res.status} ${res.text.slice(0, 200)}`;
          if (!ANSWERS.includes(res.status)) throw new Error(context);
          seen.add(res.status);
          expectPrototypesUntouched(context);
          const after = await em().findOneOrFail(Run, { id: runId }, { populate: ['planJson'] });
          const json = contentType === 'application/json' || contentType === 'application/json; charset=utf-8';
          if (body.kind === 'plan' && json && Buffer.byteLength(body.text) <= MAX_PLAN_REPORT_BYTES) {
            expect({ context, status: res.status, run: after.status }).toEqual({ context, status: 200, run: 'planned' });
            expect({
              additions: after.resourceAdditions,
              changes: after.resourceChanges,
              destructions: after.resourceDestructions,
              imports: after.resourceImports,
            }).toEqual(body.counts);
            // Kept as the bytes reported (stored apart from the run) and served as them.
            const served = await ctx.h.http
              .get(`/api/v2/runs/${runId}/plan/json-output`)
              .set('Authorization', `Bearer ${ctx.h.adminToken}`);
            expect({ context, served: served.text }).toEqual({ context, served: body.text });
          } else if (res.status !== 200) {
            expect({ context, run: after.status, plan: after.planJson, stored: after.planObject, version: after.version }).toEqual({
              context,
              run: 'planning',
              plan: null,
              stored: null,
              version: run.version,
            });
            expect(res.headers['content-type']).toContain(JSON_API);
          }
          if (body.kind === 'plan' && Buffer.byteLength(body.text) > MAX_PLAN_REPORT_BYTES && json) expect(res.status).toBe(413);
          if (!json) expect(res.status).toBe(415);
        }),
        { numRuns: RUNS.planReports },
      );
      expect([...seen].sort()).toEqual(expect.arrayContaining([200, 415, 422]));
    }, 120_000);
  });
}
