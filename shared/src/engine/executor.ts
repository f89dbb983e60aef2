/**
 * Plan and apply are not executed by this service: an executor completes them. The default one
 * completes them at once; a deployment that drives real Terraform plugs in its own. An advance calls
 * them before it writes the run's steps, and reads the run again when another advance wrote first: a
 * call may be repeated for the same run, also concurrently, so it must be idempotent.
 */
export interface RunExecutor {
  plan(runId: string): Promise<void>;
  apply(runId: string): Promise<void>;
}

export const immediateExecutor: RunExecutor = {
  plan: async () => undefined,
  apply: async () => undefined,
};
