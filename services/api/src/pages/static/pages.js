/* global document, window, fetch, AbortController, DOMParser, CSS -- this file runs in the browser */
// The pages' one script: keeps "how long ago" current, and keeps the run page's live part current
// while the run moves, saying so whenever it cannot. No framework and no inline script (the pages'
// Content-Security-Policy allows only this file).
(() => {
  'use strict';

  // "3 minutes ago", as the server writes it (components.ts `relative`).
  const format = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });
  const UNITS = [
    ['day', 86400],
    ['hour', 3600],
    ['minute', 60],
    ['second', 1],
  ];
  function refreshTimes(root) {
    for (const element of root.querySelectorAll('time[data-relative]')) {
      const seconds = Math.round((Date.parse(element.getAttribute('datetime')) - Date.now()) / 1000);
      if (Number.isNaN(seconds)) continue;
      const [unit, size] = UNITS.find(([, length]) => Math.abs(seconds) >= length) || ['second', 1];
      element.textContent = format.format(Math.round(seconds / size), unit);
    }
  }
  window.setInterval(() => refreshTimes(document), 15000);

  const live = document.getElementById('run-live');
  if (!live) return;
  const announcer = document.getElementById('live-status');
  const notice = document.getElementById('live-notice');
  const noticeText = notice && notice.querySelector('.live-notice-text');
  const noticeButton = notice && notice.querySelector('.live-notice-action');
  const noticeSignIn = notice && notice.querySelector('.live-notice-sign-in');
  const interval = Math.max(1000, Number(live.dataset.interval) || 5000);
  // A request that hangs (a connection the network dropped without a word) is given up and counted as a
  // failure, so the page says so and tries again rather than waiting on it for ever.
  const answerWithinMs = Math.max(5000, 3 * interval);
  let current = live;
  // The page's own fingerprint: its first refresh costs a 304 when nothing changed since it was made.
  let etag = live.dataset.etag || '';
  let timer = 0;
  let asking = false;
  let stopped = false;
  let failures = 0;
  // Set by a 429: the service is up but asks this page (with everything else its token sends) to slow down.
  let busyWaitMs = 0;

  // What the notice says, and what its one control does: nothing shown when all is well.
  function say(text, control) {
    if (!notice) return;
    notice.hidden = !text;
    noticeText.textContent = text || '';
    noticeButton.hidden = !control || control === 'sign-in';
    noticeSignIn.hidden = control !== 'sign-in';
    if (control && control !== 'sign-in') noticeButton.textContent = control;
  }

  // A comment being written (text in a field, or the field focused) holds the page as it is.
  const writing = () =>
    (current.contains(document.activeElement) && document.activeElement.matches('textarea')) ||
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
    // <details> a person opened stay open, and a comment written stays where its form still is.
    for (const details of current.querySelectorAll('details[open][id]'))
      next.querySelector(`#${CSS.escape(details.id)}`)?.setAttribute('open', '');
    for (const field of current.querySelectorAll('textarea[id]')) {
      const same = next.querySelector(`#${CSS.escape(field.id)}`);
      if (same && field.value) same.value = field.value;
    }
    const adopted = document.adoptNode(next);
    current.replaceWith(adopted);
    if (announcer && adopted.dataset.status !== current.dataset.status) announcer.textContent = `Run status: ${adopted.dataset.status}`;
    current = adopted;
    refreshTimes(current);
    // Focus stays where it was, so a keyboard user is not thrown back to the top of the page.
    if (place) current.querySelector(place)?.focus();
  }

  function stop(text, control) {
    stopped = true;
    window.clearTimeout(timer);
    timer = 0;
    say(text, control);
  }

  async function refresh(force) {
    timer = 0;
    if (asking || stopped || current.dataset.final === 'true' || document.hidden) return;
    if (writing() && !force) {
      say('Live updates are paused while you write a comment.', 'Update now');
      return schedule();
    }
    asking = true;
    const giveUp = new AbortController();
    const deadline = window.setTimeout(() => giveUp.abort(), answerWithinMs);
    try {
      const response = await fetch(current.dataset.liveUrl, {
        headers: etag ? { 'If-None-Match': etag } : {},
        credentials: 'same-origin',
        cache: 'no-store',
        signal: giveUp.signal,
      });
      if (response.status === 200 || response.status === 304) {
        failures = 0;
        if (response.status === 200) {
          etag = response.headers.get('ETag') || '';
          swap(await response.text());
        }
        say(
          current.dataset.final === 'true' ? '' : writing() ? 'Live updates are paused while you write a comment.' : '',
          writing() && 'Update now',
        );
      } else if (response.status === 429) {
        busyWaitMs = Math.min(60000, Math.max(1, Number(response.headers.get('Retry-After')) || 1) * 1000);
      } else if (response.status === 401) {
        return stop('You are signed out (or your token was revoked or expired): this page no longer updates.', 'sign-in');
      } else if (response.status === 404 || response.status === 403) {
        return stop('This run can no longer be shown to you: this page no longer updates.', 'Reload');
      } else {
        throw new Error(`status ${response.status}`);
      }
    } catch {
      failures += 1;
      const wait = Math.round(Math.min(60000, interval * 2 ** failures) / 1000);
      say(`The service cannot be reached: live updates stopped. Trying again in ${wait} s.`, 'Try now');
    } finally {
      window.clearTimeout(deadline);
      asking = false;
    }
    schedule();
  }

  function schedule() {
    if (timer || stopped || current.dataset.final === 'true') return;
    // A run in a status the service leaves at once is asked about again soon; a service out of reach less often.
    const wait =
      busyWaitMs > 0
        ? busyWaitMs
        : failures > 0
          ? Math.min(60000, interval * 2 ** failures)
          : current.dataset.settling === 'true'
            ? Math.min(interval, 500)
            : interval;
    busyWaitMs = 0;
    timer = window.setTimeout(() => refresh(false), wait);
  }

  noticeButton?.addEventListener('click', () => {
    if (noticeButton.textContent === 'Reload') return window.location.reload();
    window.clearTimeout(timer);
    timer = 0;
    refresh(true);
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && !timer) refresh(false);
  });
  schedule();
})();
