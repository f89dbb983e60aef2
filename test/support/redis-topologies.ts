import { keySlot } from '@runtasks/shared/queue';
import { Redis, type RedisOptions } from 'ioredis';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { eventually } from './fixtures.ts';
import { freePort } from './processes.ts';

/**
 * Redis topologies of a test's own, from the machine's redis-server, on loopback, in a temporary
 * directory, on free ports: a primary with a replica and three sentinels (`redis-server <conf>
 * --sentinel`), and a cluster of three primaries with a replica each (`redis-cli --cluster create`).
 * Optionally with a password on every data node (and another on the sentinels) and TLS on every port
 * (a certificate authority made for the occasion). Each can fail its primary over; `stop()` kills every
 * process and removes the directory. Nothing here touches the machine's own Redis.
 */

const run = promisify(execFile);

export interface TopologyOptions {
  /** `requirepass` (and `masterauth`) on every data node. */
  password?: string;
  /** `requirepass` on the sentinels. */
  sentinelPassword?: string;
  /** TLS on every port (no plain port), with a certificate for 127.0.0.1 and localhost. */
  tls?: boolean;
  /** `cluster-node-timeout` (ms): how long before a cluster fails a silent primary over. */
  clusterNodeTimeoutMs?: number;
  /** `sentinel down-after-milliseconds`: how long before the sentinels call a silent primary down. */
  sentinelDownAfterMs?: number;
}

/** One redis-server (a data node or a sentinel) with its configuration file in the topology's directory. */
class RedisProcess {
  readonly port: number;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly confFile: string;
  readonly sentinel: boolean;
  private readonly clientOptions: RedisOptions;

  constructor(port: number, confFile: string, sentinel: boolean, clientOptions: RedisOptions) {
    this.port = port;
    this.confFile = confFile;
    this.sentinel = sentinel;
    this.clientOptions = clientOptions;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process and resolves once it answers PING. */
  async start(): Promise<void> {
    const child = spawn('redis-server', [this.confFile, ...(this.sentinel ? ['--sentinel'] : [])], { stdio: 'ignore' });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    await eventually(
      async () => (await this.withClient((client) => client.ping()).catch(() => undefined)) === 'PONG' || undefined,
      // Six of them start at once on a busy machine (a benchmark's cluster took longer than 15 s).
      30_000,
      50,
    );
  }

  /** kill -9: no shutdown, no save, sockets reset. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.child?.kill('SIGKILL');
    await this.exited;
  }

  /** A short-lived plain client to this very process. */
  async withClient<T>(work: (client: Redis) => Promise<T>): Promise<T> {
    const client = new Redis({
      host: '127.0.0.1',
      port: this.port,
      ...this.clientOptions,
      lazyConnect: true,
      connectTimeout: 2_000,
      commandTimeout: 5_000,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return await work(client);
    } finally {
      client.disconnect();
    }
  }
}

/** A certificate authority and a server certificate for 127.0.0.1 and localhost, in `dir`. */
async function makeCertificates(dir: string): Promise<{ ca: string; cert: string; key: string }> {
  const file = (name: string): string => join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await run('openssl', [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=runtasks test CA',
  ]);
  await run('openssl', ['req', ...ec, '-keyout', file('server.key'), '-out', file('server.csr'), '-subj', '/CN=localhost']);
  await writeFile(file('san.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.crt'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-out',
    file('server.crt'),
    '-days',
    '2',
    '-extfile',
    file('san.cnf'),
  ]);
  return { ca: file('ca.crt'), cert: file('server.crt'), key: file('server.key') };
}

/** What every topology has: its directory, its processes, TLS material, and the variables that point the service at it. */
abstract class Topology {
  protected readonly dir: string;
  protected readonly options: TopologyOptions;
  protected readonly processes: RedisProcess[] = [];
  protected certificates: { ca: string; cert: string; key: string } | undefined;

  protected constructor(dir: string, options: TopologyOptions) {
    this.dir = dir;
    this.options = options;
  }

  /** REDIS_URL: a node's address, or as the other modes read it, the data nodes' scheme and password (its host not used). */
  protected credentialsUrl(port?: number): string {
    const password = this.options.password ? `:${encodeURIComponent(this.options.password)}@` : '';
    return `${this.options.tls ? 'rediss' : 'redis'}://${password}127.0.0.1${port === undefined ? '' : `:${port}`}/0`;
  }

  protected tlsEnv(): Record<string, string> {
    return this.certificates ? { REDIS_TLS_CA: this.certificates.ca } : {};
  }

  /** Options of a plain client to a data node (or, with `sentinel`, to a sentinel). */
  protected clientOptions(sentinel = false): RedisOptions {
    const password = sentinel ? this.options.sentinelPassword : this.options.password;
    return {
      ...(password ? { password } : {}),
      ...(this.certificates ? { tls: { ca: readFileSync(this.certificates.ca) } } : {}),
    };
  }

  /** The lines every process's configuration starts with: loopback, its port (TLS or plain), its directory. */
  protected baseConf(port: number, dir: string): string[] {
    const lines = ['bind 127.0.0.1', `dir ${dir}`, 'save ""', 'appendonly no', 'protected-mode no', 'loglevel warning'];
    if (this.certificates) {
      const { ca, cert, key } = this.certificates;
      lines.push(
        'port 0',
        `tls-port ${port}`,
        `tls-cert-file ${cert}`,
        `tls-key-file ${key}`,
        `tls-ca-cert-file ${ca}`,
        'tls-auth-clients no',
        'tls-replication yes',
      );
    } else {
      lines.push(`port ${port}`);
    }
    return lines;
  }

  /** Boots a topology just made; one that fails to start is stopped (its processes killed, its directory removed). */
  protected static async booted<T extends Topology>(topology: T, boot: () => Promise<void>): Promise<T> {
    try {
      await boot();
    } catch (error) {
      await topology.stop();
      throw error;
    }
    return topology;
  }

  protected async prepare(): Promise<void> {
    if (this.options.tls) this.certificates = await makeCertificates(this.dir);
  }

  /** A data node's configuration file and process (not started). */
  protected async node(port: number, extra: string[], sentinel = false): Promise<RedisProcess> {
    const dir = join(this.dir, String(port));
    await run('mkdir', ['-p', dir]);
    const confFile = join(dir, sentinel ? 'sentinel.conf' : 'redis.conf');
    const auth = sentinel
      ? this.options.sentinelPassword
        ? [`requirepass ${this.options.sentinelPassword}`]
        : []
      : this.options.password
        ? [`requirepass ${this.options.password}`, `masterauth ${this.options.password}`]
        : [];
    const lines = [...this.baseConf(port, dir), ...auth, ...(sentinel ? [] : ['maxmemory-policy noeviction']), ...extra];
    await writeFile(confFile, `${lines.join('\n')}\n`);
    const server = new RedisProcess(port, confFile, sentinel, this.clientOptions(sentinel));
    this.processes.push(server);
    return server;
  }

  private dataNodesRunning(): RedisProcess[] {
    return this.processes.filter((server) => !server.sentinel && server.running);
  }

  /** The PIDs of the live data nodes (the benchmark meters their CPU). */
  async pids(): Promise<number[]> {
    return Promise.all(
      this.dataNodesRunning().map((node) =>
        node.withClient(async (client) => Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1])),
      ),
    );
  }

  /** Commands the live data nodes processed since they started (the benchmark's Redis commands per run). */
  async commandsProcessed(): Promise<number> {
    let total = 0;
    for (const node of this.dataNodesRunning()) {
      const info = await node.withClient((client) => client.info('stats'));
      total += Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0);
    }
    return total;
  }

  /** Kills every process and removes the directory. */
  async stop(): Promise<void> {
    await Promise.all(this.processes.map((server) => server.kill()));
    await rm(this.dir, { recursive: true, force: true });
  }

  /** The variables that point the service at this topology. */
  abstract env(): Record<string, string>;
}

/** One node (with TLS and a password, what a test of single mode needs beyond the machine's Redis). */
export class SingleNode extends Topology {
  private server: RedisProcess | undefined;

  static async start(options: TopologyOptions = {}): Promise<SingleNode> {
    const set = new SingleNode(await mkdtemp(join(tmpdir(), 'rt-single-')), options);
    return Topology.booted(set, async () => {
      await set.prepare();
      set.server = await set.node(await freePort(), []);
      await set.server.start();
    });
  }

  get port(): number {
    if (!this.server) throw new Error('not started');
    return this.server.port;
  }

  env(): Record<string, string> {
    return { REDIS_URL: this.credentialsUrl(this.port), ...this.tlsEnv() };
  }
}

/** A primary, a replica and three sentinels watching them as `mymaster` (quorum 2). */
export class SentinelSet extends Topology {
  static readonly NAME = 'mymaster';
  private dataNodes: RedisProcess[] = [];
  private sentinels: RedisProcess[] = [];

  static async start(options: TopologyOptions = {}): Promise<SentinelSet> {
    const set = new SentinelSet(await mkdtemp(join(tmpdir(), 'rt-sentinel-')), options);
    return Topology.booted(set, () => set.boot());
  }

  private async boot(): Promise<void> {
    await this.prepare();
    const primary = await this.node(await freePort(), []);
    await primary.start();
    const replica = await this.node(await freePort(), [`replicaof 127.0.0.1 ${primary.port}`]);
    await replica.start();
    this.dataNodes = [primary, replica];
    await eventually(async () => ((await this.replicationUp(replica)) ? true : undefined), 20_000, 100);
    const downAfter = this.options.sentinelDownAfterMs ?? 1_000;
    for (let index = 0; index < 3; index += 1) {
      const sentinel = await this.node(
        await freePort(),
        [
          `sentinel monitor ${SentinelSet.NAME} 127.0.0.1 ${primary.port} 2`,
          `sentinel down-after-milliseconds ${SentinelSet.NAME} ${downAfter}`,
          `sentinel failover-timeout ${SentinelSet.NAME} 10000`,
          `sentinel parallel-syncs ${SentinelSet.NAME} 1`,
          ...(this.options.password ? [`sentinel auth-pass ${SentinelSet.NAME} ${this.options.password}`] : []),
        ],
        true,
      );
      await sentinel.start();
      this.sentinels.push(sentinel);
    }
    // Ready once every sentinel knows the replica and the two other sentinels (their hello messages).
    await eventually(
      async () => {
        for (const sentinel of this.sentinels) {
          const [replicas, others] = await sentinel.withClient(async (client) => [
            (await client.call('SENTINEL', 'REPLICAS', SentinelSet.NAME)) as unknown[],
            (await client.call('SENTINEL', 'SENTINELS', SentinelSet.NAME)) as unknown[],
          ]);
          if (replicas.length < 1 || others.length < 2) return undefined;
        }
        return true;
      },
      30_000,
      200,
    );
  }

  private async replicationUp(replica: RedisProcess): Promise<boolean> {
    const info = await replica.withClient((client) => client.info('replication')).catch(() => '');
    return /master_link_status:up/.test(info);
  }

  env(): Record<string, string> {
    return {
      REDIS_URL: this.credentialsUrl(),
      REDIS_SENTINELS: this.sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`).join(','),
      REDIS_SENTINEL_NAME: SentinelSet.NAME,
      ...(this.options.sentinelPassword ? { REDIS_SENTINEL_PASSWORD: this.options.sentinelPassword } : {}),
      ...this.tlsEnv(),
    };
  }

  /** The port of the primary as a live sentinel names it. */
  async primaryPort(): Promise<number> {
    for (const sentinel of this.sentinels) {
      if (!sentinel.running) continue;
      const answer = await sentinel
        .withClient((client) => client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SentinelSet.NAME) as Promise<[string, string]>)
        .catch(() => undefined);
      if (answer) return Number(answer[1]);
    }
    throw new Error('no sentinel answers');
  }

  /** A plain client to the current primary, for scans at the end. */
  async primaryClient(): Promise<Redis> {
    const port = await this.primaryPort();
    const client = new Redis({ host: '127.0.0.1', port, ...this.clientOptions(), maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    return client;
  }

  /**
   * Kills the primary (-9) and resolves once the sentinels have promoted the replica and it takes
   * writes: the failover, with how long it took from the kill.
   */
  async failover(): Promise<{ killed: number; promoted: number; ms: number }> {
    const killedPort = await this.primaryPort();
    const victim = this.dataNodes.find((node) => node.port === killedPort);
    if (!victim) throw new Error(`the primary ${killedPort} is not one of ours`);
    const started = Date.now();
    await victim.kill();
    const promoted = await eventually(
      async () => {
        const port = await this.primaryPort().catch(() => undefined);
        if (port === undefined || port === killedPort) return undefined;
        const node = this.dataNodes.find((candidate) => candidate.port === port);
        const role = await node?.withClient((client) => client.info('replication')).catch(() => '');
        return role && /role:master/.test(role) ? port : undefined;
      },
      60_000,
      100,
    );
    return { killed: killedPort, promoted, ms: Date.now() - started };
  }
}

/** Three primaries with a replica each, made with `redis-cli --cluster create … --cluster-replicas 1`. */
export class RedisClusterSet extends Topology {
  private nodes: RedisProcess[] = [];

  static async start(options: TopologyOptions = {}): Promise<RedisClusterSet> {
    const set = new RedisClusterSet(await mkdtemp(join(tmpdir(), 'rt-cluster-')), options);
    return Topology.booted(set, () => set.boot());
  }

  private async boot(): Promise<void> {
    await this.prepare();
    for (let index = 0; index < 6; index += 1) {
      const busPort = await freePort();
      const node = await this.node(await freePort(), [
        'cluster-enabled yes',
        'cluster-config-file nodes.conf',
        `cluster-node-timeout ${this.options.clusterNodeTimeoutMs ?? 2_000}`,
        `cluster-port ${busPort}`,
        // A replica takes over however long its primary was away.
        'cluster-replica-validity-factor 0',
        ...(this.certificates ? ['tls-cluster yes'] : []),
      ]);
      this.nodes.push(node);
    }
    await Promise.all(this.nodes.map((node) => node.start()));
    await run(
      'redis-cli',
      [
        ...this.cliOptions(),
        '--cluster',
        'create',
        ...this.nodes.map((node) => `127.0.0.1:${node.port}`),
        '--cluster-replicas',
        '1',
        '--cluster-yes',
      ],
      { timeout: 60_000 },
    );
    await eventually(async () => ((await this.healthy()) ? true : undefined), 60_000, 200);
  }

  private cliOptions(): string[] {
    return [
      ...(this.options.password ? ['-a', this.options.password, '--no-auth-warning'] : []),
      ...(this.certificates ? ['--tls', '--cacert', this.certificates.ca] : []),
    ];
  }

  /** Every live node says the cluster is ok, knows the others, and every replica's link is up. */
  private async healthy(): Promise<boolean> {
    for (const node of this.nodes.filter((candidate) => candidate.running)) {
      const [cluster, replication] = await node
        .withClient(async (client) => [(await client.call('CLUSTER', 'INFO')) as string, await client.info('replication')])
        .catch(() => ['', '']);
      if (!/cluster_state:ok/.test(cluster)) return false;
      if (/role:slave/.test(replication) && !/master_link_status:up/.test(replication)) return false;
    }
    return true;
  }

  env(): Record<string, string> {
    return {
      REDIS_URL: this.credentialsUrl(),
      REDIS_CLUSTER_NODES: this.nodes
        .slice(0, 3)
        .map((node) => `127.0.0.1:${node.port}`)
        .join(','),
      ...this.tlsEnv(),
    };
  }

  /** The port of the primary that serves `key`'s slot, as a live node says. */
  async primaryPortOf(key: string): Promise<number> {
    const slot = keySlot(key);
    for (const node of this.nodes.filter((candidate) => candidate.running)) {
      const slots = await node
        .withClient((client) => client.call('CLUSTER', 'SLOTS') as Promise<[number, number, [string, number, string]][]>)
        .catch(() => undefined);
      const range = slots?.find(([from, to]) => slot >= from && slot <= to);
      if (range) return Number(range[2][1]);
    }
    throw new Error(`no node answers for slot ${slot}`);
  }

  /** A plain client to the primary of `key`'s slot, for scans at the end. */
  async primaryClientOf(key: string): Promise<Redis> {
    const port = await this.primaryPortOf(key);
    const client = new Redis({ host: '127.0.0.1', port, ...this.clientOptions(), maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    return client;
  }

  /**
   * Kills (-9) the primary that serves `key`'s slot and resolves once its replica has taken the slot
   * over and the cluster is ok again: the failover, with how long it took from the kill.
   */
  async failover(key: string): Promise<{ killed: number; promoted: number; ms: number }> {
    const killedPort = await this.primaryPortOf(key);
    const victim = this.nodes.find((node) => node.port === killedPort);
    if (!victim) throw new Error(`the primary ${killedPort} is not one of ours`);
    const started = Date.now();
    await victim.kill();
    const promoted = await eventually(
      async () => {
        const port = await this.primaryPortOf(key).catch(() => undefined);
        if (port === undefined || port === killedPort) return undefined;
        return (await this.stateOk()) ? port : undefined;
      },
      60_000,
      100,
    );
    return { killed: killedPort, promoted, ms: Date.now() - started };
  }

  private async stateOk(): Promise<boolean> {
    for (const node of this.nodes.filter((candidate) => candidate.running)) {
      const info = await node.withClient((client) => client.call('CLUSTER', 'INFO') as Promise<string>).catch(() => '');
      if (!/cluster_state:ok/.test(info)) return false;
    }
    return true;
  }
}
