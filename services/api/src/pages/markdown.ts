import { Marked } from 'marked';
import sanitizeHtml from 'sanitize-html';
import { escapeHtml, SafeHtml } from './html.ts';
import { OUTBOUND_REL, safeHref } from './links.ts';

/** Bodies longer than this are cut before rendering: a page stays cheap to build whatever a server sends. */
export const MARKDOWN_MAX_CHARS = 64 * 1024;

// GitHub-flavoured Markdown; raw HTML in the source is escaped by the renderer's own `html` hook
// below, then the sanitizer keeps only the listed tags, so HTML never passes either way.
const marked = new Marked({ gfm: true, breaks: false, async: false });
marked.use({ renderer: { html: ({ text }) => escapeHtml(text) } });

const SANITIZE: sanitizeHtml.IOptions = {
  allowedTags: [
    'p',
    'br',
    'hr',
    'h1',
    'h2',
    'h3',
    'h4',
    'h5',
    'h6',
    'blockquote',
    'pre',
    'code',
    'em',
    'strong',
    'del',
    's',
    'ul',
    'ol',
    'li',
    'a',
    'table',
    'thead',
    'tbody',
    'tr',
    'th',
    'td',
    'input',
  ],
  allowedAttributes: { a: ['href', 'rel'], th: ['align'], td: ['align'], ol: ['start'], input: ['type', 'checked', 'disabled'] },
  allowedSchemes: ['http', 'https'],
  allowProtocolRelative: false,
  // No images: a server's image would be fetched by every reader's browser (a tracking pixel at least).
  disallowedTagsMode: 'discard',
  exclusiveFilter: (frame) => frame.tag === 'input' && frame.attribs['type'] !== 'checkbox',
  transformTags: {
    a: (tagName, attribs) => {
      // A link that is not absolute http(s) keeps its text, as an anchor without a target.
      const href = safeHref(attribs['href']);
      const kept: Record<string, string> = href ? { href, rel: OUTBOUND_REL } : {};
      return { tagName, attribs: kept };
    },
    input: (tagName, attribs) => ({
      tagName,
      attribs: { type: 'checkbox', disabled: '', ...(attribs['checked'] === undefined ? {} : { checked: '' }) },
    }),
  },
};

/** A task server's Markdown as sanitized HTML: no raw HTML, no script, links http(s) only. */
export function renderMarkdown(source: string): SafeHtml {
  const text = source.length > MARKDOWN_MAX_CHARS ? `${source.slice(0, MARKDOWN_MAX_CHARS)}\n\n…` : source;
  const rendered = marked.parse(text, { async: false });
  return new SafeHtml(sanitizeHtml(rendered, SANITIZE));
}
