import { afterEach, describe, expect, it } from '@jest/globals';
import type { Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { eventually } from '../../../../test/support/fixtures.ts';
import { connectionCeiling, createApiServer, openFilesLimit, SERVER_LIMITS, type ServerLimits } from './server.ts';

/** The production limits scaled down, so that a test waits a fraction of a second for each. */
const SHORT: ServerLimits = { requestMs: 2_000, headersMs: 300, idleSocketMs: 300, checkIntervalMs: 50 };
const BIG_BODY = Buffer.alloc(32 * 1024 * 1024, 0x61);

/** Polls until `check` holds (the shared `eventually` waits for a value). */
const until = (check: () => Promise<boolean>): Promise<true> => eventually(async () => ((await check()) ? true : undefined));

const connections = (server: Server): Promise<number> =>
  new Promise((resolve, reject) => server.getConnections((error, count) => (error ? reject(error) : resolve(count))));

describe("the API's HTTP server limits", () => {
  let server: Server | undefined;
  const sockets: Socket[] = [];

  async function start(maxConnections?: number, limits: ServerLimits = SHORT): Promise<number> {
    server = createApiServer(
      (req, res) => {
        if (req.url === '/big') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(BIG_BODY);
        else res.writeHead(204).end();
      },
      limits,
      maxConnections,
    );
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  }

  async function open(port: number): Promise<Socket> {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    sockets.push(socket);
    await new Promise((resolve) => socket.once('connect', resolve));
    return socket;
  }

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  it('are those of production unless told otherwise', () => {
    const production = createApiServer(() => undefined);
    expect([production.requestTimeout, production.headersTimeout, production.timeout]).toEqual([
      SERVER_LIMITS.requestMs,
      SERVER_LIMITS.headersMs,
      SERVER_LIMITS.idleSocketMs,
    ]);
    expect(SERVER_LIMITS.checkIntervalMs).toBeLessThan(SERVER_LIMITS.headersMs);
  });

  it('cut off a client that never finishes its headers (slowloris)', async () => {
    const socket = await open(await start());
    let closed = false;
    socket.on('close', () => (closed = true));
    socket.write('GET / HTTP/1.1\r\nHost: example\r\n');
    await until(async () => closed);
    // The server counts the socket gone when its own side has closed, which can follow the client's 'close'.
    expect(await until(async () => (await connections(server!)) === 0)).toBe(true);
  });

  it('close the socket of a client that never reads its response, releasing what it held', async () => {
    const socket = await open(await start());
    socket.pause();
    socket.write('GET /big HTTP/1.1\r\nHost: example\r\n\r\n');
    await until(async () => (await connections(server!)) === 1);
    // The client reads nothing: the response cannot drain, the socket goes idle, and the server ends it.
    await until(async () => (await connections(server!)) === 0);
    expect(socket.bytesRead).toBeLessThan(BIG_BODY.length);
  });

  it('leave a well-behaved keep-alive client alone between its requests', async () => {
    const port = await start();
    const socket = await open(port);
    const answers: string[] = [];
    socket.on('data', (chunk: Buffer) => answers.push(chunk.toString('latin1')));
    socket.write('GET / HTTP/1.1\r\nHost: example\r\n\r\n');
    await until(async () => answers.join('').includes('204'));
    socket.write('GET / HTTP/1.1\r\nHost: example\r\n\r\n');
    await until(async () => answers.join('').split('HTTP/1.1 204').length === 3);
    expect(socket.destroyed).toBe(false);
  });

  it('take no more connections than the ceiling: one past it is closed at once, and the server still answers', async () => {
    // Timeouts far off, so that only the ceiling closes a connection here.
    const port = await start(2, { ...SHORT, headersMs: 20_000, idleSocketMs: 20_000, requestMs: 30_000 });
    await open(port);
    const second = await open(port);
    await until(async () => (await connections(server!)) === 2);
    const third = await open(port);
    let thirdClosed = false;
    third.on('close', () => (thirdClosed = true));
    await until(async () => thirdClosed);
    expect(await connections(server!)).toBe(2);
    // One goes: a new client is served.
    second.destroy();
    await until(async () => (await connections(server!)) === 1);
    const fourth = await open(port);
    const answers: string[] = [];
    fourth.on('data', (chunk: Buffer) => answers.push(chunk.toString('latin1')));
    fourth.write('GET / HTTP/1.1\r\nHost: example\r\n\r\n');
    await until(async () => answers.join('').includes('HTTP/1.1 204'));
  });
});

describe('the connection ceiling', () => {
  const limits = (soft: string): string =>
    `Limit                     Soft Limit           Hard Limit           Units     \nMax open files            ${soft}                 1048576              files     \n`;

  it.each([
    ['a soft limit of 1024', limits('1024'), 1024],
    ['a soft limit of 20000', limits('20000'), 20000],
    ['no limit', limits('unlimited'), undefined],
    ['nothing readable', '', undefined],
  ])('reads %s as %s', (_label, text, expected) => {
    expect(openFilesLimit(text)).toBe(expected);
  });

  it("reads this process's own limit on Linux", () => {
    expect(openFilesLimit()).toBeGreaterThan(0);
  });

  it.each([
    [1024, 84, 940],
    [50, 84, 1],
    [undefined, 84, undefined],
  ])('with %s open files and %s reserved, takes %s connections', (openFiles, reserved, expected) => {
    expect(connectionCeiling(openFiles, reserved)).toBe(expected);
  });
});
