import type { EntityManager } from '@mikro-orm/postgresql';
import { invalidAttribute } from '@runtasks/shared/errors';
import { runOptionConflict, type RunOptions } from '@runtasks/shared/domain';
import { z } from 'zod';
import { flexibleBoolean, safeText } from '../routes/schemas.ts';

/** As Terraform spells a version: `1.9.0`, `1.10.0-beta1`. */
const TERRAFORM_VERSION = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?$/;

/** A resource address list (`-target`, `-replace`): bounded, each address non-empty, none repeated. */
const addresses = z
  .array(safeText(1_000).min(1, 'must not be empty'))
  .max(1_000, 'must list at most 1000 addresses')
  .refine((values) => new Set(values).size === values.length, 'must not repeat an address');

/** A run variable: an HCL literal under a Terraform variable name, as HCP stores it. */
const variable = z.object({
  key: safeText(128).regex(/^[A-Za-z_][A-Za-z0-9_-]*$/, 'must be a Terraform variable name'),
  value: safeText(100_000),
});

/** HCP's run creation attributes beyond plan-only, destroy and auto-apply: spread into the create schema. */
export const runOptionAttributes = {
  refresh: flexibleBoolean.optional(),
  'refresh-only': flexibleBoolean.optional(),
  'allow-empty-apply': flexibleBoolean.optional(),
  'save-plan': flexibleBoolean.optional(),
  'allow-config-generation': flexibleBoolean.optional(),
  'debugging-mode': flexibleBoolean.optional(),
  'terraform-version': z.string().regex(TERRAFORM_VERSION, 'must be a Terraform version such as 1.9.0').optional(),
  'target-addrs': addresses.optional(),
  'replace-addrs': addresses.optional(),
  variables: z
    .array(variable)
    .max(1_000, 'must list at most 1000 variables')
    .refine((values) => new Set(values.map((value) => value.key)).size === values.length, 'must not repeat a key')
    .optional(),
};

type OptionAttributes = { [K in keyof typeof runOptionAttributes]?: z.output<(typeof runOptionAttributes)[K]> };

/**
 * The run's stored options from its create attributes: what was given, the Terraform version the run
 * uses (the one asked for, else the workspace's), and its source. A combination HCP refuses is a 422
 * naming the attribute (runOptionConflict), before anything is written.
 */
export function runOptionsFrom(
  attributes: OptionAttributes,
  run: { planOnly: boolean; isDestroy: boolean; workspaceTerraformVersion: string },
): RunOptions {
  const given: RunOptions = {
    refresh: attributes.refresh,
    refreshOnly: attributes['refresh-only'],
    allowEmptyApply: attributes['allow-empty-apply'],
    savePlan: attributes['save-plan'],
    allowConfigGeneration: attributes['allow-config-generation'],
    debuggingMode: attributes['debugging-mode'],
    terraformVersion: attributes['terraform-version'],
    targetAddrs: attributes['target-addrs'],
    replaceAddrs: attributes['replace-addrs'],
    variables: attributes.variables,
  };
  const conflict = runOptionConflict({ planOnly: run.planOnly, isDestroy: run.isDestroy, options: given });
  if (conflict) throw invalidAttribute(`/data/attributes/${conflict.attribute}`, conflict.detail);
  const stored = Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined)) as RunOptions;
  return { ...stored, terraformVersion: given.terraformVersion ?? run.workspaceTerraformVersion, source: 'tfe-api' };
}

/** Records who confirmed a run, inside the transaction that applies it (so a crash keeps both or neither). */
export async function recordConfirmedBy(tx: EntityManager, runId: string, tokenId: string | null): Promise<void> {
  await tx.execute('update runs set confirmed_by = ? where id = ?', [tokenId, runId]);
}
