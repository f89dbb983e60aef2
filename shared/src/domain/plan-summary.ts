/**
 * What a plan document (`terraform show -json <planfile>`) changes, counted as HCP counts a plan's
 * resources, and the check that a reported document is a plan at all.
 */
export interface PlanSummary {
  resourceAdditions: number;
  resourceChanges: number;
  resourceDestructions: number;
  resourceImports: number;
  /**
   * Whether applying the plan does something: Terraform's own `applyable` where the document has it
   * (Terraform 1.8 and later write it in every plan); otherwise any resource to create, update, delete,
   * replace, import, move or forget, or any output to change.
   */
  hasChanges: boolean;
}

/**
 * A reading of a plan document: its summary, and whether Terraform marked it `errored` (the plan failed
 * part way: its changes are incomplete and it cannot be applied).
 */
export type PlanReading = { ok: true; summary: PlanSummary; errored: boolean } | { ok: false; pointer: string; detail: string };

export const EMPTY_PLAN_SUMMARY: PlanSummary = {
  resourceAdditions: 0,
  resourceChanges: 0,
  resourceDestructions: 0,
  resourceImports: 0,
  hasChanges: false,
};

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Members at least one of which every plan document has (a state document has `values` instead). */
const PLAN_MEMBERS = ['planned_values', 'resource_changes', 'output_changes', 'configuration'];

/** A change's `actions`, or an error at its pointer. */
function actionsOf(change: unknown, pointer: string): string[] | { pointer: string; detail: string } {
  if (!isObject(change)) return { pointer, detail: `${pointer} must be an object with an "actions" array.` };
  const actions = change['actions'];
  if (!Array.isArray(actions) || !actions.every((action) => typeof action === 'string'))
    return { pointer: `${pointer}/actions`, detail: `${pointer}/actions must be an array of action names such as "create".` };
  return actions as string[];
}

type Counts = Omit<PlanSummary, 'hasChanges'>;

/** One resource change into the counts: a replacement (delete and create, in either order) is one addition and one destruction. */
function count(counts: Counts, actions: readonly string[], importing: boolean): void {
  if (actions.includes('create')) counts.resourceAdditions += 1;
  if (actions.includes('delete')) counts.resourceDestructions += 1;
  if (actions.includes('update')) counts.resourceChanges += 1;
  if (importing) counts.resourceImports += 1;
}

/**
 * A change HCP's counts leave out that applying still carries out: a `forget` (a `removed` block that
 * keeps the object, Terraform 1.7), or a move (`previous_address` differs from `address`, Terraform 1.1).
 */
function changesStateOnly(resource: Record<string, unknown>, actions: readonly string[]): boolean {
  if (actions.includes('forget')) return true;
  const previous = resource['previous_address'];
  return typeof previous === 'string' && previous !== resource['address'];
}

/** A top-level flag Terraform writes as a boolean (`applyable`, `errored`): undefined where absent (or null), an error where not a boolean. */
function flag(document: Record<string, unknown>, name: string): boolean | undefined | { pointer: string; detail: string } {
  const value = document[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'boolean') return value;
  return { pointer: `/${name}`, detail: `/${name} must be true or false, as Terraform writes it.` };
}

/** Reads a parsed JSON value as a plan document: its counts, or where it is not one. */
export function readPlan(document: unknown): PlanReading {
  const notAPlan = 'The body is not a Terraform plan: send the output of `terraform show -json <planfile>`.';
  if (!isObject(document)) return { ok: false, pointer: '', detail: notAPlan };
  if (typeof document['format_version'] !== 'string')
    return { ok: false, pointer: '/format_version', detail: `/format_version is missing or not a string. ${notAPlan}` };
  if (!PLAN_MEMBERS.some((member) => member in document))
    return { ok: false, pointer: '', detail: `None of ${PLAN_MEMBERS.join(', ')} is present. ${notAPlan}` };
  const applyable = flag(document, 'applyable');
  if (typeof applyable === 'object') return { ok: false, ...applyable };
  const errored = flag(document, 'errored');
  if (typeof errored === 'object') return { ok: false, ...errored };
  const counts: Counts = { resourceAdditions: 0, resourceChanges: 0, resourceDestructions: 0, resourceImports: 0 };
  let stateChanges = false;
  const resourceChanges = document['resource_changes'] ?? [];
  if (!Array.isArray(resourceChanges))
    return { ok: false, pointer: '/resource_changes', detail: '/resource_changes must be an array of resource changes.' };
  for (const [index, resource] of resourceChanges.entries()) {
    const pointer = `/resource_changes/${index}`;
    if (!isObject(resource)) return { ok: false, pointer, detail: `${pointer} must be an object.` };
    const actions = actionsOf(resource['change'], `${pointer}/change`);
    if (!Array.isArray(actions)) return { ok: false, ...actions };
    // Data sources are read, never changed.
    if (resource['mode'] === 'data') continue;
    const change = resource['change'] as Record<string, unknown>;
    count(counts, actions, isObject(change['importing']));
    stateChanges ||= changesStateOnly(resource, actions);
  }
  const outputChanges = document['output_changes'] ?? {};
  if (!isObject(outputChanges)) return { ok: false, pointer: '/output_changes', detail: '/output_changes must be an object.' };
  let outputsChange = false;
  for (const [name, change] of Object.entries(outputChanges)) {
    const pointer = `/output_changes/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    const actions = actionsOf(change, pointer);
    if (!Array.isArray(actions)) return { ok: false, ...actions };
    outputsChange ||= actions.some((action) => action !== 'no-op');
  }
  const resources = counts.resourceAdditions + counts.resourceChanges + counts.resourceDestructions + counts.resourceImports;
  // Terraform's own verdict where it gives one: it also knows of refresh-only drift and changes the JSON does not show.
  // An errored plan applies nothing, whatever it lists.
  const hasChanges = errored !== true && (applyable ?? (resources > 0 || outputsChange || stateChanges));
  return { ok: true, summary: { ...counts, hasChanges }, errored: errored === true };
}
