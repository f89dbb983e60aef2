/**
 * The attributes a run keeps from its creation besides those the engine reads (plan-only, destroy,
 * auto-apply): HCP's `refresh`, `refresh-only`, `target-addrs`, `variables`, ... They are stored as given
 * (runs.options) and shown with HCP's defaults, so a run created before they existed reads as HCP's would.
 */

/** Where a run came from: the API (`POST /runs`), or a configuration version's upload (auto-queued). */
export const RUN_SOURCES = ['tfe-api', 'tfe-configuration-version'] as const;
export type RunSource = (typeof RUN_SOURCES)[number];

/** HCP's run operations (`filter[operation]`), derived from the run's attributes. */
export const RUN_OPERATIONS = ['plan_and_apply', 'plan_only', 'refresh_only', 'destroy', 'empty_apply', 'save_plan'] as const;
export type RunOperation = (typeof RUN_OPERATIONS)[number];

export interface RunVariable {
  key: string;
  value: string;
}

/** As stored: only what the request set, plus `terraformVersion` and `source`, which are always recorded. */
export interface RunOptions {
  refresh?: boolean;
  refreshOnly?: boolean;
  allowEmptyApply?: boolean;
  savePlan?: boolean;
  terraformVersion?: string;
  targetAddrs?: string[];
  replaceAddrs?: string[];
  variables?: RunVariable[];
  allowConfigGeneration?: boolean;
  debuggingMode?: boolean;
  source?: RunSource;
}

/** Every option with HCP's default where the run did not set it. */
export interface ResolvedRunOptions {
  refresh: boolean;
  refreshOnly: boolean;
  allowEmptyApply: boolean;
  savePlan: boolean;
  terraformVersion: string | null;
  targetAddrs: string[] | null;
  replaceAddrs: string[] | null;
  variables: RunVariable[];
  allowConfigGeneration: boolean;
  debuggingMode: boolean;
  source: RunSource;
}

export function resolveRunOptions(options: RunOptions | null | undefined): ResolvedRunOptions {
  const given = options ?? {};
  return {
    refresh: given.refresh ?? true,
    refreshOnly: given.refreshOnly ?? false,
    allowEmptyApply: given.allowEmptyApply ?? false,
    savePlan: given.savePlan ?? false,
    terraformVersion: given.terraformVersion ?? null,
    targetAddrs: given.targetAddrs ?? null,
    replaceAddrs: given.replaceAddrs ?? null,
    variables: given.variables ?? [],
    allowConfigGeneration: given.allowConfigGeneration ?? false,
    debuggingMode: given.debuggingMode ?? false,
    source: given.source ?? 'tfe-api',
  };
}

/** The operation HCP files a run under: the most specific kind wins, in HCP's order. */
export function runOperation(run: { planOnly: boolean; isDestroy: boolean }, options: ResolvedRunOptions): RunOperation {
  if (options.savePlan) return 'save_plan';
  if (run.planOnly) return 'plan_only';
  if (options.refreshOnly) return 'refresh_only';
  if (run.isDestroy) return 'destroy';
  if (options.allowEmptyApply) return 'empty_apply';
  return 'plan_and_apply';
}

/** What a run's creation asks for, as the conflict rules see it. */
export interface RunRequest {
  planOnly: boolean;
  isDestroy: boolean;
  options: RunOptions;
}

/** A combination HCP (or Terraform, which would fail the run later) refuses: the attribute to point at and why. */
export interface RunOptionConflict {
  attribute: string;
  detail: string;
}

const RULES: readonly { attribute: string; applies: (request: RunRequest) => boolean; detail: string }[] = [
  {
    attribute: 'terraform-version',
    applies: (r) => r.options.terraformVersion !== undefined && !r.planOnly,
    detail: 'A Terraform version can only be set for plan-only runs.',
  },
  {
    attribute: 'refresh-only',
    applies: (r) => r.options.refreshOnly === true && r.options.refresh === false,
    detail: 'A refresh-only run refreshes: it cannot also set refresh to false.',
  },
  {
    attribute: 'refresh-only',
    applies: (r) => r.options.refreshOnly === true && r.isDestroy,
    detail: 'A run cannot be both refresh-only and a destroy.',
  },
  {
    attribute: 'replace-addrs',
    applies: (r) => (r.options.replaceAddrs?.length ?? 0) > 0 && (r.options.refreshOnly === true || r.isDestroy),
    detail: 'Resources can only be replaced in a normal plan, not in a refresh-only or destroy run.',
  },
  {
    attribute: 'save-plan',
    applies: (r) => r.options.savePlan === true && r.planOnly,
    detail: 'A plan-only run cannot be a saved plan: its plan can never be applied.',
  },
  {
    attribute: 'allow-empty-apply',
    applies: (r) => r.options.allowEmptyApply === true && r.planOnly,
    detail: 'A plan-only run is never applied, so it cannot allow an empty apply.',
  },
];

/** The first rule a run's creation breaks, or null: the request is refused with it, as a whole. */
export function runOptionConflict(request: RunRequest): RunOptionConflict | null {
  const rule = RULES.find((candidate) => candidate.applies(request));
  return rule ? { attribute: rule.attribute, detail: rule.detail } : null;
}
