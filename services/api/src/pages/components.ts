import { isTagLevel } from '@runtasks/shared/domain';
import { html, type SafeHtml } from './html.ts';
import { OUTBOUND_REL, safeHref } from './links.ts';
import type { StatusWords } from './status-words.ts';

/** `post_plan` → "post plan" (stage names, enforcement levels: words people read). */
export const words = (status: string): string => status.replaceAll('_', ' ');

/** A status as a badge: its words and its colour. */
export const statusBadge = (status: StatusWords): SafeHtml => html`<span class="badge tone-${status.tone}">${status.label}</span>`;

/**
 * Text a task server (or a person) wrote, isolated from the text around it: a right-to-left override
 * in it (U+202E, say) cannot turn what follows it around.
 */
export const untrusted = (text: string | null | undefined): SafeHtml | undefined =>
  text === null || text === undefined ? undefined : html`<bdi>${text}</bdi>`;

/** Outcome tag levels (none, info, warning, error), each with its own colour; anything else reads as none. */
export const tagBadge = (name: string, label: string, level: string | undefined): SafeHtml =>
  html`<span class="badge level-${isTagLevel(level) ? level : 'none'}"
    ><span class="tag-name">${untrusted(name)}:</span> ${untrusted(label)}</span
  >`;

const ago = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });
const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['day', 86_400],
  ['hour', 3600],
  ['minute', 60],
  ['second', 1],
];

/** "3 minutes ago", "in 5 seconds": how long before (or after) `now` an instant was. */
export function relative(date: Date, now: Date): string {
  const seconds = Math.round((date.getTime() - now.getTime()) / 1000);
  const [unit, size] = UNITS.find(([, length]) => Math.abs(seconds) >= length) ?? ['second', 1];
  return ago.format(Math.round(seconds / size), unit);
}

/**
 * A timestamp: how long ago, with the instant in UTC as its title and machine-readable in `datetime`.
 * The page's script keeps "how long ago" current between updates.
 */
export function time(value: string | Date | null | undefined, now: Date = new Date()): SafeHtml | undefined {
  if (!value) return undefined;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return undefined;
  const iso = date.toISOString();
  return html`<time datetime="${iso}" title="${iso.slice(0, 19).replace('T', ' ')} UTC" data-relative="">${relative(date, now)}</time>`;
}

/** A duration in the units people use: "850 ms", "42 s", "3 min 5 s", "2 h 10 min". */
export function duration(milliseconds: number): string {
  if (milliseconds < 1000) return `${Math.max(0, Math.round(milliseconds))} ms`;
  const seconds = Math.round(milliseconds / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return seconds % 60 === 0 ? `${minutes} min` : `${minutes} min ${seconds % 60} s`;
  return minutes % 60 === 0 ? `${Math.floor(minutes / 60)} h` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** An outbound link when the URL is absolute http(s), else nothing. */
export function outboundLink(url: string | null | undefined, label: string, fullName?: string): SafeHtml | undefined {
  const href = safeHref(url);
  if (!href) return undefined;
  // A short label ("More") says which link it is to a screen reader in its accessible name.
  return fullName
    ? html`<a href="${href}" rel="${OUTBOUND_REL}" aria-label="${fullName}">${label}</a>`
    : html`<a href="${href}" rel="${OUTBOUND_REL}">${label}</a>`;
}

/** Previous/next links of a paginated list (page numbers as the API takes them). */
export function pager(basePath: string, page: { number: number; size: number }, total: number, label: string): SafeHtml | undefined {
  const pages = Math.max(1, Math.ceil(total / page.size));
  if (pages <= 1) return undefined;
  const link = (number: number, text: string): SafeHtml =>
    html`<a href="${basePath}?page%5Bnumber%5D=${number}&amp;page%5Bsize%5D=${page.size}">${text}</a>`;
  return html`<nav class="pager" aria-label="${label} pages">
    ${page.number > 1 ? link(page.number - 1, 'Newer') : undefined}
    <span>Page ${page.number} of ${pages}</span>
    ${page.number < pages ? link(page.number + 1, 'Older') : undefined}
  </nav>`;
}

export interface DataTableOptions {
  /** Column headings, in order. */
  headers: readonly string[];
  /** One `<tr>` per row, whose cells follow `headers`. */
  rows: readonly SafeHtml[];
  caption?: string;
  className?: string;
}

/**
 * A table that scrolls sideways on narrow screens instead of widening the page. The scrolling box can
 * take keyboard focus (arrow keys scroll it) and is named after its table, for those who land on it.
 */
export function dataTable({ headers, rows, caption, className }: DataTableOptions): SafeHtml {
  return html`<div class="scroll" tabindex="0" role="region" aria-label="${caption ?? headers.join(', ')}">
    <table${className ? html` class="${className}"` : undefined}>
      ${
        caption
          ? html`<caption>
              ${caption}
            </caption>`
          : undefined
      }
      <thead>
        <tr>
          ${headers.map((header) => html`<th scope="col">${header}</th>`)}
        </tr>
      </thead>
      <tbody>
        ${rows}
      </tbody>
    </table>
  </div>`;
}
