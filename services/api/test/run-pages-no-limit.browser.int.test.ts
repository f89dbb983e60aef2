import { runPagesInBrowser } from './run-pages/browser-suite.ts';

/** The browser suite of run-pages.browser.int.test.ts with rate limiting off (RATE_LIMIT_PER_SECOND=0). */
runPagesInBrowser('off');
