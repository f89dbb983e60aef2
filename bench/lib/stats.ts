/** Percentiles, medians and ranges: the arithmetic every figure uses. */

export interface Range {
  median: number;
  min: number;
  max: number;
  samples: number[];
}

/** Nearest-rank percentile of an ascending array (p in 0..100). */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number;
}

export function sortedCopy(values: Iterable<number>): Float64Array {
  return Float64Array.from(values).sort();
}

export function range(samples: readonly number[]): Range {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle =
    sorted.length === 0
      ? Number.NaN
      : sorted.length % 2 === 1
        ? sorted[(sorted.length - 1) / 2]
        : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
  return { median: middle as number, min: sorted[0] ?? Number.NaN, max: sorted.at(-1) ?? Number.NaN, samples: [...samples] };
}

/** The sample whose `key` is the median (3 samples: the middle one), to report its other fields. */
export function medianSample<T>(samples: readonly T[], key: (sample: T) => number): T {
  const sorted = [...samples].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor((sorted.length - 1) / 2)] as T;
}

/** Least-squares line y = a + b·x. */
export function fitLine(points: readonly { x: number; y: number }[]): { a: number; b: number } {
  const n = points.length;
  const mx = points.reduce((sum, point) => sum + point.x, 0) / n;
  const my = points.reduce((sum, point) => sum + point.y, 0) / n;
  const sxy = points.reduce((sum, point) => sum + (point.x - mx) * (point.y - my), 0);
  const sxx = points.reduce((sum, point) => sum + (point.x - mx) ** 2, 0);
  const b = sxx === 0 ? 0 : sxy / sxx;
  return { a: my - b * mx, b };
}

export function round(value: number, digits = 1): number {
  if (!Number.isFinite(value)) return value;
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** "12.3 [11.9–13.0]" */
export function fmtRange(value: Range, digits = 1): string {
  const f = (x: number): string =>
    Number.isFinite(x) ? x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : 'n/a';
  return `${f(value.median)} [${f(value.min)}–${f(value.max)}]`;
}

export function fmt(value: number, digits = 1): string {
  return Number.isFinite(value) ? value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : 'n/a';
}
