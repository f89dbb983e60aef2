/** A plan's counts as the service reports them on its `plans` document. */
export interface PlanCounts {
  status: string;
  additions: number;
  changes: number;
  destructions: number;
  imports: number;
  hasChanges: boolean | undefined;
}

export function planCountsOf(attributes: Record<string, unknown> | undefined): PlanCounts | null {
  if (!attributes) return null;
  const n = (key: string): number => Number(attributes[key] ?? 0) || 0;
  return {
    status: String(attributes['status'] ?? ''),
    additions: n('resource-additions'),
    changes: n('resource-changes'),
    destructions: n('resource-destructions'),
    imports: n('resource-imports'),
    hasChanges: typeof attributes['has-changes'] === 'boolean' ? attributes['has-changes'] : undefined,
  };
}

/** "plan: 1 to import, 2 to add, 0 to change, 1 to destroy", Terraform's own order, for a finished plan only. */
export function planLine(plan: PlanCounts | null): string | undefined {
  if (!plan || plan.status !== 'finished') return undefined;
  const imports = plan.imports > 0 ? `${plan.imports} to import, ` : '';
  return `plan: ${imports}${plan.additions} to add, ${plan.changes} to change, ${plan.destructions} to destroy`;
}
