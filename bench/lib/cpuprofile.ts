import { readFileSync } from 'node:fs';

/** Summarises a V8 .cpuprofile (from --cpu-prof): self time by function and by package. */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  totalMs: number;
  idleMs: number;
  byPackage: { name: string; ms: number; percent: number }[];
  byFunction: { name: string; ms: number; percent: number }[];
}

/** node_modules/<package>, a project folder, node:internal, or (program)/(garbage collector). */
export function packageOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1] as string;
  if (url.startsWith('node:')) return url.split('/').slice(0, 2).join('/');
  const project = /\/work\/[^/]+\/((?:services\/[^/]+|shared|bench|examples)\/(?:src\/)?[^/]+)/.exec(url);
  if (project) return project[1] as string;
  return url.replace(/^file:\/\//, '');
}

export function summarise(file: string, top = 25): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  for (let index = 0; index < profile.samples.length; index += 1) {
    const id = profile.samples[index] as number;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0));
  }
  const packages = new Map<string, number>();
  const functions = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, micros] of self) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') {
      idle += micros;
      continue;
    }
    total += micros;
    const pkg = packageOf(url, functionName);
    packages.set(pkg, (packages.get(pkg) ?? 0) + micros);
    const name = `${functionName || '(anonymous)'} ${pkg}${url ? `:${lineNumber + 1}` : ''}`;
    functions.set(name, (functions.get(name) ?? 0) + micros);
  }
  const list = (map: Map<string, number>) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, micros]) => ({ name, ms: micros / 1000, percent: (100 * micros) / total }));
  return { totalMs: total / 1000, idleMs: idle / 1000, byPackage: list(packages), byFunction: list(functions) };
}
