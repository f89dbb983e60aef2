/** `status-timestamps` keys are the status with hyphens plus `-at`: `pre_plan_running` → `pre-plan-running-at`. */
export function statusTimestampKey(status: string): string {
  return `${status.replaceAll('_', '-')}-at`;
}
