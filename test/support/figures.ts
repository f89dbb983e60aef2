import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * What a resilience suite tried and survived (runs, faults injected, bodies fuzzed, invariant
 * violations), one JSON file per suite under `RESILIENCE_REPORT_DIR` (default `test-results/resilience`,
 * which git ignores). `npm run resilience:report` turns the files into bench/results/resilience-latest.md.
 * Figures are counts the suite observed, never targets: a test asserts; this only records.
 */
export const RESILIENCE_REPORT_DIR = process.env['RESILIENCE_REPORT_DIR'] ?? join(process.cwd(), 'test-results', 'resilience');

export type Figures = Record<string, string | number | boolean | null | Record<string, string | number | boolean | null>>;

export interface SuiteFigures {
  suite: string;
  updatedAt: string;
  /** One entry per scenario (a test's name or a short key), merged across calls. */
  scenarios: Record<string, Figures>;
}

function fileOf(suite: string): string {
  return join(RESILIENCE_REPORT_DIR, `${suite.replace(/[^a-z0-9-]/gi, '-')}.json`);
}

/** Records (merges) one scenario's figures into the suite's file; safe to call after every scenario. */
export function recordFigures(suite: string, scenario: string, figures: Figures): void {
  const file = fileOf(suite);
  let current: SuiteFigures = { suite, updatedAt: '', scenarios: {} };
  try {
    current = JSON.parse(readFileSync(file, 'utf8')) as SuiteFigures;
  } catch {
    // First scenario of this suite (or an unreadable file from an interrupted run): start afresh.
  }
  current.updatedAt = new Date().toISOString();
  current.scenarios[scenario] = { ...current.scenarios[scenario], ...figures };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(current, null, 2)}\n`);
}
