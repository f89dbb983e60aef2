import { fileURLToPath } from 'node:url';
import { type RunTaskPayload } from '../../../../test/support/scripted-server.ts';

/** What the browser suite sends the pages (hostile outcomes) and what it reads back from them. */

export const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
export const CSP_LOG = 'content security policy violation';
/** Every attempt to run script in what task servers send sets this, were it to run. */
export const PWNED = 'window.__pwned=1';

/** Task server content meant to break out: script, event handlers, javascript: links, HTML in Markdown and tag labels. */
export const HOSTILE_OUTCOME = {
  type: 'task-result-outcomes',
  attributes: {
    'outcome-id': 'CVE-2026-0001<script>',
    description: `<img src=x onerror="${PWNED}">Outdated TLS library`,
    // The API refuses javascript: in url fields; the Markdown below still carries such links.
    url: 'https://example.com/CVE-2026-0001',
    body: [
      '## Finding',
      '',
      'The **openssl** package is out of date. See [the advisory](https://example.com/advisory) and',
      `[this link](javascript:${PWNED}) and [that one](data:text/html,<script>${PWNED}</script>).`,
      '',
      `<script>${PWNED}</script>`,
      '',
      `<img src=x onerror="${PWNED}"> <a href="javascript:${PWNED}">raw</a> <iframe src="https://example.com"></iframe>`,
      '',
      '| Package | Version |',
      '| ------- | ------- |',
      '| openssl | 1.0.2   |',
    ].join('\n'),
    tags: {
      Severity: [{ label: `<img src=x onerror="${PWNED}">High`, level: 'error' }],
      Status: [{ label: 'Failed', level: 'error' }],
      [`<b onmouseover="${PWNED}">Kind</b>`]: [{ label: 'info', level: 'info' }],
    },
  },
};

// Browser-side code as text: the tests are type-checked without the DOM's types.
/** Records every violation of the pages' policy in the page itself, from before its first script. */
export const RECORD_VIOLATIONS = `window.__violations = [];
  document.addEventListener('securitypolicyviolation', (event) => window.__violations.push(event.violatedDirective + ' ' + event.blockedURI));`;

export interface DomCensus {
  pwned: unknown;
  scripts: string[];
  inlineScripts: number;
  images: number;
  frames: number;
  handlers: string[];
  links: { href: string | null; rel: string | null }[];
}

/** What in the document could run or load something. */
export const DOM_CENSUS = `({
  pwned: window.__pwned,
  scripts: [...document.scripts].filter((script) => script.src).map((script) => new URL(script.src).pathname),
  inlineScripts: [...document.scripts].filter((script) => !script.src).length,
  images: document.images.length,
  frames: document.querySelectorAll('iframe, object, embed').length,
  handlers: [...document.querySelectorAll('*')].flatMap((element) => element.getAttributeNames().filter((name) => name.startsWith('on'))),
  links: [...document.querySelectorAll('a[href]')].map((anchor) => ({ href: anchor.getAttribute('href'), rel: anchor.getAttribute('rel') })),
})`;

/** PATCHes a result's callback with any attributes and outcomes, as a task server does. */
export async function callBackWith(
  payload: RunTaskPayload,
  attributes: Record<string, unknown>,
  outcomes: unknown[] = [],
): Promise<number> {
  const response = await fetch(payload.task_result_callback_url, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${payload.access_token}`, 'content-type': 'application/vnd.api+json' },
    body: JSON.stringify({ data: { type: 'task-results', attributes, relationships: { outcomes: { data: outcomes } } } }),
  });
  await response.arrayBuffer();
  return response.status;
}
