/**
 * Plan and apply are not executed by this service: an executor completes them. The default one
 * completes them at once; a deployment that drives real Terraform plugs in its own.
 */
export interface RunExecutor {
  plan(runId: string): Promise<void>;
  apply(runId: string): Promise<void>;
}

export const immediateExecutor: RunExecutor = {
  plan: async () => undefined,
  apply: async () => undefined,
};
