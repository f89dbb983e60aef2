import type { Edition } from './editions.ts';

/**
 * HCP's plans as site-admin feature sets, mapped onto our editions. go-tfe's own tests pick a plan
 * by name (`Business`, `Trial`, …) and expect `global-run-tasks` to follow it.
 */
export interface FeatureSet {
  id: string;
  name: string;
  edition: Edition;
  globalRunTasks: boolean;
}

export const FEATURE_SETS: readonly FeatureSet[] = [
  { id: 'fs-free', name: 'Free', edition: 'free', globalRunTasks: false },
  { id: 'fs-trial', name: 'Trial', edition: 'free', globalRunTasks: false },
  { id: 'fs-standard', name: 'Standard', edition: 'standard', globalRunTasks: true },
  { id: 'fs-standard-entitlement', name: 'Standard (entitlement)', edition: 'standard', globalRunTasks: true },
  { id: 'fs-plus-entitlement', name: 'Plus (entitlement)', edition: 'standard', globalRunTasks: true },
  { id: 'fs-premium-entitlement', name: 'Premium (entitlement)', edition: 'standard', globalRunTasks: true },
  { id: 'fs-business', name: 'Business', edition: 'standard', globalRunTasks: true },
];

/** `q` matches names case-insensitively, anywhere in the name (as HCP's admin API does). */
export function findFeatureSets(query: string | undefined): FeatureSet[] {
  const needle = (query ?? '').trim().toLowerCase();
  return FEATURE_SETS.filter((set) => set.name.toLowerCase().includes(needle));
}
