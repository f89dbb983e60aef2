import { createHash } from 'node:crypto';

/**
 * A self-contained HTML page (no external scripts, styles or fonts) that fetches the OpenAPI
 * document and lists the endpoints by tag: method, path, summary, auth, parameters and the
 * request body's JSON Schema (with `$ref`s inlined) in a collapsible block.
 */

/** A JSON value as a JavaScript literal that is safe inside a <script> element (no `</script>`, no `<!--`). */
function scriptLiteral(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
}

const STYLE = `
  :root { color-scheme: light dark; --fg: #1f2328; --muted: #59636e; --bg: #fff; --panel: #f6f8fa; --line: #d1d9e0; }
  @media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9198a1; --bg: #0d1117; --panel: #151b23; --line: #3d444d; } }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
  header, main { max-width: 1100px; margin: 0 auto; padding: 16px 24px; }
  header h1 { margin: 8px 0 4px; font-size: 24px; }
  header p { margin: 4px 0; color: var(--muted); }
  code, pre, .path { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
  input[type=search] { width: 100%; padding: 8px 10px; margin-top: 12px; font: inherit; color: inherit; background: var(--panel);
    border: 1px solid var(--line); border-radius: 6px; }
  h2 { margin: 28px 0 8px; font-size: 18px; text-transform: capitalize; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
  .op { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; background: var(--panel); }
  .op > .line { display: flex; flex-wrap: wrap; gap: 8px 12px; align-items: baseline; padding: 8px 12px; }
  .method { display: inline-block; min-width: 64px; text-align: center; font-weight: 700; font-size: 12px; padding: 2px 6px;
    border-radius: 4px; color: #fff; background: #6e7781; }
  .GET { background: #0969da; } .POST { background: #1a7f37; } .PATCH { background: #9a6700; } .PUT { background: #8250df; }
  .DELETE { background: #cf222e; }
  .path { font-weight: 600; word-break: break-all; }
  .summary { color: var(--muted); flex: 1 1 260px; }
  .auth { font-size: 12px; padding: 1px 8px; border: 1px solid var(--line); border-radius: 999px; white-space: nowrap; }
  .details { padding: 0 12px 10px; }
  .details p { margin: 4px 0; }
  .params { margin: 4px 0; padding-left: 20px; }
  details { margin: 6px 0; }
  summary { cursor: pointer; color: var(--muted); }
  pre { margin: 6px 0 0; padding: 10px; overflow: auto; max-height: 480px; background: var(--bg); border: 1px solid var(--line);
    border-radius: 6px; }
  .warn { color: #bc4c00; }
  .error { color: #cf222e; }
`;

const SCRIPT = `
(function () {
  var content = document.getElementById('content');
  var filter = document.getElementById('filter');
  var METHODS = ['get', 'post', 'put', 'patch', 'delete'];

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function pointer(doc, ref) {
    if (typeof ref !== 'string' || ref.indexOf('#/') !== 0) return undefined;
    return ref.slice(2).split('/').reduce(function (node, part) {
      return node === undefined ? undefined : node[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    }, doc);
  }

  // Inlines components $refs for display; a reference already being expanded is shown as-is.
  function inline(doc, node, seen) {
    if (Array.isArray(node)) return node.map(function (item) { return inline(doc, item, seen); });
    if (node === null || typeof node !== 'object') return node;
    if (typeof node.$ref === 'string' && seen.indexOf(node.$ref) === -1) {
      var target = pointer(doc, node.$ref);
      if (target !== undefined) return inline(doc, target, seen.concat([node.$ref]));
    }
    var out = {};
    Object.keys(node).forEach(function (key) { out[key] = inline(doc, node[key], seen); });
    return out;
  }

  function authOf(doc, op) {
    if (op['x-auth']) return op['x-auth'] === 'public' ? 'no auth' : op['x-auth'];
    var security = op.security || doc.security || [];
    if (security.length === 0) return 'no auth';
    return security.map(function (req) { return Object.keys(req).join(' + '); }).join(' or ');
  }

  function block(label, value) {
    var details = el('details');
    details.appendChild(el('summary', '', label));
    details.appendChild(el('pre', '', JSON.stringify(value, null, 2)));
    return details;
  }

  function renderOperation(doc, method, path, op) {
    var card = el('div', 'op');
    card.dataset.search = (method + ' ' + path + ' ' + (op.summary || '') + ' ' + (op.operationId || '')).toLowerCase();
    var line = el('div', 'line');
    line.appendChild(el('span', 'method ' + method.toUpperCase(), method.toUpperCase()));
    line.appendChild(el('span', 'path', path));
    line.appendChild(el('span', 'summary', op.summary || ''));
    line.appendChild(el('span', 'auth', authOf(doc, op)));
    card.appendChild(line);

    var details = el('div', 'details');
    if (op.description) details.appendChild(el('p', '', op.description));
    var params = (op.parameters || []).map(function (param) { return inline(doc, param, []); });
    if (params.length) {
      var list = el('ul', 'params');
      params.forEach(function (param) {
        var item = el('li');
        item.appendChild(el('code', '', param.name));
        item.appendChild(document.createTextNode(' (' + param.in + (param.required ? ', required' : '') + ')' +
          (param.description ? ': ' + param.description : '')));
        list.appendChild(item);
      });
      details.appendChild(list);
    }
    if (op.requestBody) {
      var types = Object.keys(op.requestBody.content || {});
      var first = types.length ? op.requestBody.content[types[0]] : undefined;
      var label = 'Request body' + (op.requestBody.required ? '' : ' (optional)') + ': ' + types.join(', ');
      details.appendChild(block(label, first && first.schema ? inline(doc, first.schema, []) : {}));
    }
    if (op['x-unrepresentable']) {
      details.appendChild(el('p', 'warn', 'Not representable in JSON Schema (shown as any value): ' + op['x-unrepresentable'].join('; ')));
    }
    var codes = Object.keys(op.responses || {});
    if (codes.length) details.appendChild(el('p', '', 'Responses: ' + codes.join(', ')));
    card.appendChild(details);
    return card;
  }

  function render(doc) {
    document.getElementById('title').textContent = (doc.info && doc.info.title) || 'API';
    var server = doc.servers && doc.servers[0] ? doc.servers[0].url : '';
    document.getElementById('meta').textContent =
      'Version ' + ((doc.info && doc.info.version) || '?') + ' · OpenAPI ' + doc.openapi + (server ? ' · ' + server : '');
    var groups = {};
    var order = (doc.tags || []).map(function (tag) { return tag.name; });
    Object.keys(doc.paths || {}).forEach(function (path) {
      var item = doc.paths[path];
      METHODS.forEach(function (method) {
        var op = item[method];
        if (!op) return;
        var tag = (op.tags && op.tags[0]) || path.split('/').filter(Boolean)[0] || 'other';
        if (order.indexOf(tag) === -1) order.push(tag);
        (groups[tag] = groups[tag] || []).push(renderOperation(doc, method, path, op));
      });
    });
    content.textContent = '';
    order.forEach(function (tag) {
      if (!groups[tag]) return;
      var section = el('section');
      section.appendChild(el('h2', '', tag));
      groups[tag].forEach(function (card) { section.appendChild(card); });
      content.appendChild(section);
    });
  }

  filter.addEventListener('input', function () {
    var term = filter.value.trim().toLowerCase();
    document.querySelectorAll('.op').forEach(function (card) {
      card.hidden = term !== '' && card.dataset.search.indexOf(term) === -1;
    });
    document.querySelectorAll('section').forEach(function (section) {
      section.hidden = !section.querySelector('.op:not([hidden])');
    });
  });

  fetch(OPENAPI_URL, { headers: { accept: 'application/json' } })
    .then(function (response) {
      if (!response.ok) throw new Error(OPENAPI_URL + ' answered ' + response.status);
      return response.json();
    })
    .then(render)
    .catch(function (error) {
      content.textContent = '';
      content.appendChild(el('p', 'error', 'Could not load the API description: ' + error.message));
    });
})();
`;

/** The /docs page: renders the document served at `openapiUrl` (e.g. `/openapi.json`) in the browser. */
export function docsPage(openapiUrl: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Run Tasks Service API</title>
<style>${STYLE}</style>
</head>
<body>
<header>
<h1 id="title">Run Tasks Service API</h1>
<p id="meta">Loading…</p>
<p>Machine-readable description: <a id="spec-link"></a></p>
<input id="filter" type="search" placeholder="Filter by method, path or summary" aria-label="Filter endpoints">
</header>
<main id="content"><p>Loading the API description…</p></main>
<script>
var OPENAPI_URL = ${scriptLiteral(openapiUrl)};
var link = document.getElementById('spec-link');
link.href = OPENAPI_URL;
link.textContent = OPENAPI_URL;
${SCRIPT}
</script>
</body>
</html>
`;
}

/**
 * The page's own Content-Security-Policy: its one inline script allowed by its hash (nothing else
 * inline runs), its inline style, requests to this origin only, and never framed.
 */
export function docsPagePolicy(page: string): string {
  const script = /<script>([\s\S]*?)<\/script>/.exec(page)?.[1] ?? '';
  const hash = createHash('sha256').update(script, 'utf8').digest('base64');
  return `default-src 'self'; script-src 'sha256-${hash}'; style-src 'unsafe-inline'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
}
