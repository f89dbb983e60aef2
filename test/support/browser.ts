import { chromium, type Browser } from 'playwright-core';

/**
 * Debian's Chromium, headless, as every browser test drives it: playwright-core downloads no browser here,
 * and without the background-networking flags Chromium keeps trying hosts this closed network refuses.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
