import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from './support/cli-harness.ts';

/**
 * `runtasks run start` up to its upload, against a local server standing in for the service (the
 * failures here are ones the real service does not make on purpose): what cannot be archived ends the
 * command with exit 2 before anything is created, and a failed upload never prints the upload URL,
 * whose secret is as good as a token for that configuration version.
 */
const SECRET = 'cvup-0123456789abcdefSECRETabcdef0123456789';
const UPLOAD_PATH = `/api/v2/uploads/configuration-versions/${SECRET}`;
/** Each test starts the CLI (a Node process) twice: room for a busy machine. */
const SPAWNS_TIMEOUT = 60_000;

describe('runtasks run start: the archive and its upload', () => {
  let server: Server;
  let address: string;
  let uploadAnswer: (res: ServerResponse) => void;
  let uploadUrl: () => string;
  const seen: string[] = [];
  let dir: string;

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      req.on('end', () => {
        const route = `${req.method} ${req.url}`;
        seen.push(route);
        const json = (status: number, body: unknown): void =>
          void res.writeHead(status, { 'content-type': 'application/vnd.api+json' }).end(JSON.stringify(body));
        if (route === 'GET /api/v2/ping') return void res.writeHead(204, { 'tfp-api-version': '2.6' }).end();
        if (route === 'GET /api/v2/organizations/acme/workspaces/network') {
          return json(200, { data: { id: 'ws-1', type: 'workspaces', attributes: { 'execution-mode': 'local' } } });
        }
        if (route === 'POST /api/v2/workspaces/ws-1/configuration-versions') {
          return json(201, { data: { id: 'cv-1', type: 'configuration-versions', attributes: { 'upload-url': uploadUrl() } } });
        }
        if (route === `PUT ${UPLOAD_PATH}`) return uploadAnswer(res);
        json(404, { errors: [{ status: '404', title: 'not found' }] });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    address = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    uploadUrl = () => `${address}${UPLOAD_PATH}`;
    dir = mkdtempSync(join(tmpdir(), 'runtasks-cli-upload-'));
    writeFileSync(join(dir, 'main.tf'), 'resource "null_resource" "a" {}\n');
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  afterEach(() => {
    seen.length = 0;
  });

  const start = (output: 'text' | 'json' = 'text') =>
    runCli(['run', 'start', '--workspace', 'acme/network', '--config-dir', dir, '--output', output], address, 'token');

  it(
    'ends with exit 2, naming each entry it cannot archive, before creating anything',
    async () => {
      execFileSync('mkfifo', [join(dir, 'pipe')]);
      try {
        const result = await start();
        expect(result.code).toBe(2);
        expect(result.stderr).toBe(
          `runtasks: cannot archive ${dir}: an entry cannot go into the configuration: pipe is a FIFO (named pipe), ` +
            'which a configuration cannot hold (only files, directories and symlinks). Leave them out with .terraformignore, or fix them\n',
        );
        expect(seen).toEqual(['GET /api/v2/ping', 'GET /api/v2/organizations/acme/workspaces/network']);
      } finally {
        rmSync(join(dir, 'pipe'));
      }
    },
    SPAWNS_TIMEOUT,
  );

  it.each([
    [
      'a JSON:API error quoting the path',
      (res: ServerResponse) =>
        res
          .writeHead(500, { 'content-type': 'application/vnd.api+json' })
          .end(JSON.stringify({ errors: [{ status: '500', title: 'storage failed', detail: `could not store ${UPLOAD_PATH}` }] })),
      4,
      'runtasks: PUT the upload URL answered 500: storage failed: could not store the upload URL\n',
    ],
    [
      'a 413',
      (res: ServerResponse) => res.writeHead(413, { 'content-type': 'text/plain' }).end(`too large: ${UPLOAD_PATH}`),
      5,
      'runtasks: PUT the upload URL answered 413: HTTP 413\n',
    ],
    [
      'a page that is not JSON',
      (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>ok</h1>'),
      4,
      /^runtasks: PUT the upload URL answered something that is not JSON/,
    ],
    [
      'a redirect',
      (res: ServerResponse) => res.writeHead(307, { location: `${address}/elsewhere${UPLOAD_PATH}` }).end(),
      4,
      /^runtasks: PUT the upload URL was redirected \(307\)/,
    ],
  ])(
    'never prints the upload URL when the upload gets %s, in text or JSON',
    async (_, answer, code, message) => {
      uploadAnswer = answer;
      for (const output of ['text', 'json'] as const) {
        const result = await start(output);
        expect(result.code).toBe(code);
        expect(result.stderr).toMatch(message);
        expect(`${result.stdout}${result.stderr}`).not.toContain(SECRET);
        if (output === 'json')
          expect(JSON.parse(result.stdout)).toMatchObject({ error: { message: expect.stringContaining('the upload URL') } });
      }
      expect(seen.filter((route) => route.startsWith('PUT '))).toEqual([`PUT ${UPLOAD_PATH}`, `PUT ${UPLOAD_PATH}`]);
    },
    SPAWNS_TIMEOUT,
  );

  it(
    'never prints an upload URL it cannot even parse or reach',
    async () => {
      const reachable = uploadUrl;
      try {
        for (const broken of [`http://[::1${UPLOAD_PATH}`, `http://127.0.0.1:1${UPLOAD_PATH}`]) {
          uploadUrl = () => broken;
          const result = await start();
          expect(result.code).toBe(4);
          expect(result.stderr).toMatch(/^runtasks: cannot reach the service at .*\n$/);
          expect(`${result.stdout}${result.stderr}`).not.toContain(SECRET);
        }
      } finally {
        uploadUrl = reachable;
      }
    },
    SPAWNS_TIMEOUT,
  );
});
