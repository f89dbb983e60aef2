/**
 * HTML built by one tagged template that escapes every interpolated value unless it is already
 * SafeHtml (made by this module, or by the Markdown renderer after sanitizing). Pages never
 * concatenate strings into markup by hand, so text from task servers cannot become markup by mistake.
 */
export class SafeHtml {
  readonly value: string;
  constructor(value: string) {
    this.value = value;
  }
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (char) => ESCAPES[char] ?? char);

/** What may stand in a template's hole: text (escaped), markup, lists of either, or nothing. */
export type Html = SafeHtml | string | number | boolean | null | undefined | readonly Html[];

function render(value: Html): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: Html[]): SafeHtml {
  let out = strings[0] ?? '';
  values.forEach((value, index) => {
    out += render(value) + (strings[index + 1] ?? '');
  });
  return new SafeHtml(out);
}
