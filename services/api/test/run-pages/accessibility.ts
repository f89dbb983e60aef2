import { expect } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';

/** axe-core's own bundle, evaluated in the page (as DevTools would: the page's policy allows no inline script). */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

// Browser-side code as text: the tests are type-checked without the DOM's types.
const RUN_AXE = `axe.run(document, { resultTypes: ['violations'] }).then((results) => results.violations.map((violation) => ({
  id: violation.id,
  impact: violation.impact,
  help: violation.help,
  nodes: violation.nodes.map((node) => node.target.join(' ')),
})))`;

/** Runs axe-core's checks (WCAG 2 A and AA, and its best practices) on the page as it is now. */
export async function accessibilityViolations(page: Page): Promise<AxeViolation[]> {
  if (!(await page.evaluate<boolean>(`typeof window.axe === 'object'`))) await page.evaluate(AXE_SOURCE);
  return page.evaluate<AxeViolation[]>(RUN_AXE);
}

/** The page has no serious or critical accessibility violation (lesser ones are listed when it fails, too). */
export async function expectAccessible(page: Page, what: string): Promise<void> {
  const violations = await accessibilityViolations(page);
  const severe = violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
  expect({ page: what, severe }).toEqual({ page: what, severe: [] });
}
