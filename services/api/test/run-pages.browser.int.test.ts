import { runPagesInBrowser } from './run-pages/browser-suite.ts';

/**
 * The run pages in a real browser (Debian's Chromium through playwright-core), with the API as
 * `npm start` runs it: the default rate limit on (run-pages-no-limit.browser.int.test.ts runs the same
 * suite with it off). Sign in with a token, follow the links a task server is sent and a link from
 * another site, watch a run's stages pass, fail and wait for an override without reloading, override
 * from the page and see who did it, pause and stop live updates, sign out; other sites can neither
 * sign a person in nor out; a foreign run's page is a missing one's; what task servers send renders
 * inert; the pages' Content-Security-Policy is never violated, and axe-core finds no serious or
 * critical accessibility problem on any page.
 */
runPagesInBrowser('default');
