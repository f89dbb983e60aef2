import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time per process from /proc/<pid>/stat (utime + stime), for every process of the benchmark:
 * the Node processes it starts, the PostgreSQL backends serving its database (and PostgreSQL's shared
 * background processes), and Redis. Whatever else the machine did in the same window is "foreign".
 */

export type Role = 'api' | 'worker' | 'task-server' | 'loadgen' | 'postgres' | 'postgres-bg' | 'redis';
export const ROLES: readonly Role[] = ['api', 'worker', 'task-server', 'loadgen', 'postgres', 'postgres-bg', 'redis'];

export const TICK_MS = 1000 / 100; // CLK_TCK is 100 on Linux

/** utime + stime of a process, in clock ticks; undefined once it is gone. */
export function processTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "pid (comm) ": state is field 3, utime field 14, stime field 15.
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\u0000', ' ');
  } catch {
    return '';
  }
}

/** Busy ticks of the whole machine (all cores): everything but idle and iowait. */
export function systemTicks(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
  const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
  return (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0);
}

export function cpuModel(): string {
  const info = readFileSync('/proc/cpuinfo', 'utf8');
  return /model name\s*:\s*(.+)/.exec(info)?.[1]?.trim() ?? 'unknown';
}

export interface CpuReport {
  /** CPU milliseconds per role over the window. */
  ms: Record<Role, number>;
  /**
   * Processes measured per role. A short window can leave a role at 0 ms with its processes found
   * (the kernel counts in 10 ms ticks per process), so this is what shows the meter saw them.
   */
  processes: Record<Role, number>;
  /** Sum of the roles. */
  totalMs: number;
  /** The benchmark harness itself (sampling and progress polling, with its PostgreSQL backend): reported, not counted in the total. */
  harnessMs: number;
  /** CPU of everything else on the machine in the window, as a percentage of one core (out of 200 on 2 cores). */
  foreignPercent: number;
  /** The whole machine's busy CPU, percentage of one core. */
  machinePercent: number;
  wallMs: number;
}

export interface MeterTargets {
  /** The Node processes the benchmark started, by role. */
  processes: () => readonly { pid: number; role: Role }[];
  /** PostgreSQL's postmaster (its children are the backends and background processes). */
  postmasterPid: number;
  /** The harness's own backend (its progress polls): counted with the harness, not PostgreSQL. */
  harnessBackendPid?: number;
  /** Backends of this database are the benchmark's. */
  databaseName: string;
  /** Redis's processes: the machine's server, or every node of a private one (a cluster has six). */
  redisPids: readonly number[];
}

interface Tracked {
  role: Role;
  first: number;
  last: number;
}

const PG_BACKGROUND = /checkpointer|background writer|walwriter|autovacuum launcher|logical replication launcher|archiver|stats collector/;

/**
 * Sums CPU over a window. PostgreSQL backends come and go, so they are sampled every 200 ms (a
 * backend that ends loses at most its last 200 ms); the others are read at start and stop.
 */
export class CpuMeter {
  private readonly tracked = new Map<number, Tracked>();
  private timer: NodeJS.Timeout | undefined;
  private systemStart = 0;
  private harnessStart = 0;
  private harnessBackendStart = 0;
  private harnessBackendLastMs = 0;
  private startedAt = 0;
  private scans = 0;
  private readonly targets: MeterTargets;

  constructor(targets: MeterTargets) {
    this.targets = targets;
  }

  private classifyPostgres(pid: number): Role | undefined {
    if (pid === this.targets.harnessBackendPid || parentOf(pid) !== this.targets.postmasterPid) return undefined;
    const command = commandLine(pid);
    if (command.includes(` ${this.targets.databaseName} `)) return 'postgres';
    if (PG_BACKGROUND.test(command)) return 'postgres-bg';
    return undefined;
  }

  private observe(pid: number, role: Role, existedAtStart: boolean): void {
    const ticks = processTicks(pid);
    if (ticks === undefined) return;
    const entry = this.tracked.get(pid);
    if (entry) entry.last = ticks;
    else this.tracked.set(pid, { role, first: existedAtStart ? ticks : 0, last: ticks });
  }

  private sample(atStart: boolean): void {
    for (const { pid, role } of this.targets.processes()) this.observe(pid, role, atStart);
    for (const pid of this.targets.redisPids) this.observe(pid, 'redis', atStart);
    // Known backends every sample; new ones are looked for every 5th sample (a full /proc scan).
    for (const [pid, entry] of this.tracked)
      if (entry.role === 'postgres' || entry.role === 'postgres-bg') this.observe(pid, entry.role, false);
    if (atStart || this.scans % 5 === 0) {
      for (const name of readdirSync('/proc')) {
        const pid = Number(name);
        if (!Number.isInteger(pid) || this.tracked.has(pid)) continue;
        const role = this.classifyPostgres(pid);
        if (role) this.observe(pid, role, atStart);
      }
    }
    this.scans += 1;
  }

  /** The harness's backend CPU so far; once it is gone, what it had when last seen. */
  private harnessBackendMs(): number {
    const pid = this.targets.harnessBackendPid;
    const ticks = pid === undefined ? undefined : processTicks(pid);
    if (ticks !== undefined) this.harnessBackendLastMs = ticks * TICK_MS;
    return this.harnessBackendLastMs;
  }

  start(): void {
    this.tracked.clear();
    this.scans = 0;
    this.systemStart = systemTicks();
    const usage = process.cpuUsage();
    this.harnessStart = (usage.user + usage.system) / 1000;
    this.harnessBackendStart = this.harnessBackendMs();
    this.startedAt = performance.now();
    this.sample(true);
    this.timer = setInterval(() => this.sample(false), 200);
  }

  stop(): CpuReport {
    if (this.timer) clearInterval(this.timer);
    this.scans = 0;
    this.sample(false);
    const wallMs = performance.now() - this.startedAt;
    const usage = process.cpuUsage();
    const harnessMs = (usage.user + usage.system) / 1000 - this.harnessStart + (this.harnessBackendMs() - this.harnessBackendStart);
    const ms = Object.fromEntries(ROLES.map((role) => [role, 0])) as Record<Role, number>;
    const processes = Object.fromEntries(ROLES.map((role) => [role, 0])) as Record<Role, number>;
    for (const entry of this.tracked.values()) {
      ms[entry.role] += (entry.last - entry.first) * TICK_MS;
      processes[entry.role] += 1;
    }
    const totalMs = ROLES.reduce((sum, role) => sum + ms[role], 0);
    const machineMs = (systemTicks() - this.systemStart) * TICK_MS;
    const foreignMs = Math.max(0, machineMs - totalMs - harnessMs);
    return {
      ms,
      processes,
      totalMs,
      harnessMs,
      foreignPercent: (100 * foreignMs) / wallMs,
      machinePercent: (100 * machineMs) / wallMs,
      wallMs,
    };
  }
}
