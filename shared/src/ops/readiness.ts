/**
 * A dependency check for readiness: resolves when the dependency is usable, with what the report should
 * say of it besides (Redis: its mode and the node the process talks to).
 */
export type ReadinessCheck = () => Promise<void | Record<string, string>>;

export interface ReadinessReport {
  ready: boolean;
  components: Record<string, { ok: boolean; detail?: string; [about: string]: string | boolean | undefined }>;
}

function withTimeout(check: ReadinessCheck, timeoutMs: number): Promise<void | Record<string, string>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([check(), timeout]).finally(() => clearTimeout(timer));
}

/** Runs every check at once; ready only when all pass and the process is not draining. */
export async function checkReadiness(
  checks: Record<string, ReadinessCheck>,
  draining: boolean,
  timeoutMs = 2000,
): Promise<ReadinessReport> {
  const entries = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      try {
        const about = await withTimeout(check, timeoutMs);
        return [name, { ok: true, ...about }] as const;
      } catch (error) {
        return [name, { ok: false, detail: error instanceof Error ? error.message : String(error) }] as const;
      }
    }),
  );
  const components: ReadinessReport['components'] = Object.fromEntries(entries);
  components['draining'] = draining ? { ok: false, detail: 'shutting down' } : { ok: true };
  return { ready: Object.values(components).every((component) => component.ok), components };
}
