import { html, type SafeHtml } from './html.ts';
import { OUTBOUND_REL, safeHref } from './links.ts';

/** How a status reads at a glance; the class names are fixed here, never taken from the data. */
const TONES: Record<string, 'ok' | 'bad' | 'warn' | 'info' | 'muted'> = {
  passed: 'ok',
  applied: 'ok',
  post_apply_completed: 'ok',
  planned_and_finished: 'ok',
  failed: 'bad',
  errored: 'bad',
  unreachable: 'bad',
  awaiting_override: 'warn',
  canceled: 'muted',
  discarded: 'muted',
  pending: 'muted',
};

function toneOf(status: string): string {
  if (TONES[status]) return TONES[status];
  if (status.endsWith('_awaiting_decision')) return 'warn';
  if (status.endsWith('_completed') || status === 'planned' || status === 'confirmed') return 'ok';
  return 'info';
}

/** `post_plan_awaiting_decision` → "post plan awaiting decision". */
export const words = (status: string): string => status.replaceAll('_', ' ');

export const statusBadge = (status: string): SafeHtml => html`<span class="badge tone-${toneOf(status)}">${words(status)}</span>`;

/** Outcome tag levels (none, info, warning, error), each with its own colour; anything else reads as none. */
const LEVELS = new Set(['none', 'info', 'warning', 'error']);
export const tagBadge = (name: string, label: string, level: string | undefined): SafeHtml =>
  html`<span class="badge level-${level && LEVELS.has(level) ? level : 'none'}"><span class="tag-name">${name}:</span> ${label}</span>`;

/** A timestamp people read in UTC, machine-readable in its attribute. */
export function time(value: string | Date | null | undefined): SafeHtml | undefined {
  if (!value) return undefined;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return undefined;
  const iso = date.toISOString();
  return html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`;
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

/** A table that scrolls sideways on narrow screens instead of widening the page. */
export function dataTable({ headers, rows, caption, className }: DataTableOptions): SafeHtml {
  return html`<div class="scroll">
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
