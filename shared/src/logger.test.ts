import { describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { pino } from 'pino';
import { loggerOptions } from './logger.ts';

const PASSWORD = 'redis-password-never-logged-7f3a9c';

/** A logger with the processes' options, writing its lines into an array. */
function capturingLogger(): { logger: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: pino(loggerOptions('debug', 'logger-test'), { write: (line: string) => void lines.push(line) }), lines };
}

/** A local Redis stand-in that refuses every command (one error per command received), as a Redis does a wrong password. */
async function refusingRedis(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('data', (data: Buffer) => {
      // Each command is a RESP array, a line of its own starting with '*' (no argument here starts a line so).
      const commands = data
        .toString()
        .split('\r\n')
        .filter((line) => line.startsWith('*')).length;
      socket.write('-WRONGPASS invalid username-password pair or user is disabled.\r\n'.repeat(commands));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('logged errors never carry a command’s arguments', () => {
  it('an ioredis error from a refused password logs the refusal and the command, not the password', async () => {
    const redis = await refusingRedis();
    const client = new Redis({
      host: '127.0.0.1',
      port: redis.port,
      password: PASSWORD,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      // Its timer for a socket that will not end (2 s by default) would outlive the test.
      disconnectTimeout: 100,
    });
    const errors: Error[] = [];
    client.on('error', (error: Error) => errors.push(error));
    try {
      await client.connect().catch((error: unknown) => errors.push(error as Error));
    } finally {
      client.disconnect();
      await redis.close();
    }
    const refused = errors.find((error) => (error as { command?: { args?: unknown[] } }).command?.args?.includes(PASSWORD));
    // The premise: ioredis does attach the password to the error.
    expect(refused).toBeDefined();

    const { logger, lines } = capturingLogger();
    logger.warn({ err: refused }, 'redis connection error');
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain(PASSWORD);
    const logged = JSON.parse(lines[0] ?? '{}') as { err: { message: string; command: { name: string; args: unknown } } };
    expect(logged.err.message).toContain('WRONGPASS');
    expect(logged.err.command.args).toBe('[redacted]');
    expect(typeof logged.err.command.name).toBe('string');
  });

  it('a command nested in causes or in an AggregateError never shows its arguments either', () => {
    const inner = Object.assign(new Error('refused'), { command: { name: 'auth', args: [PASSWORD] } });
    const outer = new Error('connection failed', { cause: inner });
    const aggregate = new AggregateError(
      [outer, Object.assign(new Error('again'), { command: { name: 'auth', args: [PASSWORD] } })],
      'all failed',
    );
    const { logger, lines } = capturingLogger();
    logger.error({ err: outer }, 'one');
    logger.error({ err: aggregate }, 'two');
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).not.toContain(PASSWORD);
    // An AggregateError's errors are logged with their own properties: the command's name, not its arguments.
    const logged = JSON.parse(lines[1] ?? '{}') as { err: { aggregateErrors: { command?: { name: string; args: unknown } }[] } };
    expect(logged.err.aggregateErrors[1]?.command).toEqual({ name: 'auth', args: '[redacted]' });
  });

  it('an error without a command is logged as pino logs it', () => {
    const { logger, lines } = capturingLogger();
    logger.error({ err: Object.assign(new Error('plain'), { code: 'E_PLAIN' }) }, 'plain');
    const logged = JSON.parse(lines[0] ?? '{}') as { err: { type: string; message: string; code: string; stack: string } };
    expect(logged.err).toMatchObject({ type: 'Error', message: 'plain', code: 'E_PLAIN' });
    expect(logged.err.stack).toContain('plain');
  });
});
