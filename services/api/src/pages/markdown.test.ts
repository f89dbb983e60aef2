import { describe, expect, it } from '@jest/globals';
import { html, SafeHtml } from './html.ts';
import { safeHref } from './links.ts';
import { MARKDOWN_MAX_CHARS, renderMarkdown } from './markdown.ts';

describe('html', () => {
  it.each([
    ['<script>alert(1)</script>', '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>'],
    [`" onmouseover="x`, '<p>&quot; onmouseover=&quot;x</p>'],
    ["it's & co", '<p>it&#39;s &amp; co</p>'],
    [42, '<p>42</p>'],
    [null, '<p></p>'],
    [['<a>', new SafeHtml('<b>kept</b>')], '<p>&lt;a&gt;<b>kept</b></p>'],
  ])('escapes %j unless it is markup already', (value, expected) => {
    expect(html`<p>${value}</p>`.value).toBe(expected);
  });
});

describe('safeHref', () => {
  it.each([
    ['https://example.com/a?b=c', 'https://example.com/a?b=c'],
    ['http://example.com', 'http://example.com/'],
    ['javascript:alert(1)', undefined],
    ['JaVaScRiPt:alert(1)', undefined],
    [' javascript:alert(1)', undefined],
    ['data:text/html,<script>alert(1)</script>', undefined],
    ['vbscript:msgbox', undefined],
    ['/app/other-org', undefined],
    ['//evil.example/x', undefined],
    ['mailto:a@example.com', undefined],
    ['', undefined],
    [null, undefined],
  ])('%j → %j', (candidate, expected) => {
    expect(safeHref(candidate)).toBe(expected);
  });
});

describe('renderMarkdown', () => {
  const rendered = (source: string): string => renderMarkdown(source).value;

  it.each([
    ['**bold** and _em_', '<p><strong>bold</strong> and <em>em</em></p>'],
    ['[advisory](https://example.com/a)', '<p><a href="https://example.com/a" rel="noopener noreferrer">advisory</a></p>'],
    ['[x](javascript:alert(1))', '<p><a>x</a></p>'],
    ['[x](data:text/html,hi)', '<p><a>x</a></p>'],
    ['[x](/app/elsewhere)', '<p><a>x</a></p>'],
    ['<https://example.com>', '<p><a href="https://example.com/" rel="noopener noreferrer">https://example.com</a></p>'],
    ['![pixel](https://tracker.example/p.png)', '<p></p>'],
    ['`<b>code</b>`', '<p><code>&lt;b&gt;code&lt;/b&gt;</code></p>'],
  ])('%j', (source, expected) => {
    expect(rendered(source).trim()).toBe(expected);
  });

  it.each([
    '<script>alert(1)</script>',
    '<img src=x onerror=alert(1)>',
    '<a href="javascript:alert(1)">x</a>',
    '<iframe src="https://example.com"></iframe>',
    '<div onclick="alert(1)">x</div>',
    '<svg><script>alert(1)</script></svg>',
    '<style>body{display:none}</style>',
    'text <b onmouseover="alert(1)">inline</b> html',
  ])('keeps raw HTML as text, never as markup: %j', (source) => {
    const output = rendered(source);
    expect(output).not.toMatch(/<(script|img|iframe|div|svg|style|b)\b/i);
    expect(output).not.toMatch(/<[^>]*\son\w+=/i);
    expect(output).toContain('&lt;');
  });

  it('renders tables and task lists, inert', () => {
    const output = rendered('| a | b |\n| - | - |\n| 1 | 2 |\n\n- [x] done');
    expect(output).toContain('<td>1</td>');
    expect(output).toContain('<input type="checkbox" disabled checked />');
  });

  it('cuts very long bodies', () => {
    expect(rendered('a'.repeat(MARKDOWN_MAX_CHARS + 100)).length).toBeLessThan(MARKDOWN_MAX_CHARS + 100);
  });
});
