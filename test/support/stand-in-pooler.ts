import { createConnection, createServer, type Server, type Socket } from 'node:net';

/** PostgreSQL's SSLRequest code: the first message of a client that asks for TLS before its startup packet. */
const SSL_REQUEST_CODE = 80877103;

/** A PostgreSQL ErrorResponse message (`E`) with these fields (severity, SQLSTATE, message). */
function errorResponse(code: string, message: string): Buffer {
  const body = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0\0`, 'utf8');
  const header = Buffer.alloc(5);
  header.write('E', 0);
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

export interface StandInPoolerOptions {
  /** Whether a startup packet (its parameters as text, `\0`-separated) is refused, as PgBouncer refuses `options` it does not track. */
  refuses: (startup: string) => boolean;
  /** Where startups that are not refused go on to (a real PostgreSQL); without it, every startup is refused. */
  upstream?: { host: string; port: number };
}

export interface StandInPooler {
  readonly port: number;
  /** Startup packets seen, and how many of them were refused. */
  readonly startups: number;
  readonly refused: number;
  close(): Promise<void>;
}

/**
 * Stands in for a pooler in front of PostgreSQL (PgBouncer in transaction mode): it answers a startup
 * packet it refuses with SQLSTATE 08P01, `unsupported startup parameter`, and closes the connection;
 * any other it passes on, with everything after it, to `upstream`, both ways untouched.
 */
export async function startStandInPooler(options: StandInPoolerOptions): Promise<StandInPooler> {
  const sockets = new Set<Socket>();
  const state = { port: 0, startups: 0, refused: 0 };
  const track = (socket: Socket): Socket => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    return socket;
  };
  const server: Server = createServer((client) => {
    track(client);
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length < 8) return;
      const length = buffered.readInt32BE(0);
      if (buffered.length < length) return;
      if (length === 8 && buffered.readInt32BE(4) === SSL_REQUEST_CODE) {
        // No TLS here: the client goes on in plain text with its startup packet.
        buffered = buffered.subarray(8);
        client.write('N');
        if (buffered.length > 0) onData(Buffer.alloc(0));
        return;
      }
      client.off('data', onData);
      state.startups += 1;
      const startup = buffered.subarray(8, length).toString('utf8');
      if (options.refuses(startup) || !options.upstream) {
        state.refused += 1;
        client.end(errorResponse('08P01', 'unsupported startup parameter in options: plan_cache_mode'));
        return;
      }
      const upstream = track(createConnection(options.upstream));
      upstream.write(buffered);
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as { port: number }).port;
  return Object.assign(state, {
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  });
}
