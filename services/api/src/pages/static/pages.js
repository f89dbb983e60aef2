/* global document, window, fetch, DOMParser, CSS -- this file runs in the browser */
// The run page's live part: asks the server for it again while the run moves, and swaps it in place.
// No framework and no inline script (the pages' Content-Security-Policy allows only this file).
(() => {
  'use strict';
  const live = document.getElementById('run-live');
  if (!live) return;
  const announcer = document.getElementById('live-status');
  const interval = Math.max(1000, Number(live.dataset.interval) || 5000);
  let current = live;
  let etag = '';
  let timer = 0;
  let asking = false;

  // A person typing a comment or with a field focused keeps the page as it is until they are done.
  const busy = () =>
    (current.contains(document.activeElement) && document.activeElement.matches('textarea, input, button, select')) ||
    [...current.querySelectorAll('textarea')].some((field) => field.value.trim() !== '');

  // Where keyboard focus is inside the live part, as a selector that finds the same place in its next version.
  function focusedPlace() {
    const active = document.activeElement;
    if (!active || !current.contains(active)) return undefined;
    if (active.matches('summary') && active.parentElement.id) return `#${CSS.escape(active.parentElement.id)} > summary`;
    if (active.id) return `#${CSS.escape(active.id)}`;
    if (active.matches('a[href]')) return `a[href="${CSS.escape(active.getAttribute('href'))}"]`;
    return undefined;
  }

  function swap(text) {
    const next = new DOMParser().parseFromString(text, 'text/html').getElementById('run-live');
    if (!next) return;
    const place = focusedPlace();
    // <details> a person opened stay open.
    for (const details of current.querySelectorAll('details[open][id]'))
      next.querySelector(`#${CSS.escape(details.id)}`)?.setAttribute('open', '');
    const adopted = document.adoptNode(next);
    current.replaceWith(adopted);
    if (announcer && adopted.dataset.status !== current.dataset.status) announcer.textContent = `Run status: ${adopted.dataset.status}`;
    current = adopted;
    // Focus stays where it was, so a keyboard user is not thrown back to the top of the page.
    if (place) current.querySelector(place)?.focus();
  }

  async function refresh() {
    timer = 0;
    if (asking || current.dataset.final === 'true' || document.hidden) return;
    asking = true;
    if (!busy()) {
      try {
        const response = await fetch(current.dataset.liveUrl, {
          headers: etag ? { 'If-None-Match': etag } : {},
          credentials: 'same-origin',
          cache: 'no-store',
        });
        if (response.status === 200) {
          etag = response.headers.get('ETag') || '';
          swap(await response.text());
        } else if (response.status !== 304) {
          if (announcer) announcer.textContent = 'Live updates stopped: reload the page.';
          asking = false;
          return;
        }
      } catch {
        // The network failed this once: try again at the next tick.
      }
    }
    asking = false;
    schedule();
  }

  function schedule() {
    if (!timer && current.dataset.final !== 'true') timer = window.setTimeout(refresh, interval);
  }

  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && !timer) refresh();
  });
  schedule();
})();
