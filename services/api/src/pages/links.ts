/**
 * Links from task servers (a result's details link, an outcome's URL, links in Markdown) are followed
 * only when absolute http(s): javascript:, data: and relative links (which would point into this
 * service) are dropped.
 */
export function safeHref(candidate: string | null | undefined): string | undefined {
  if (!candidate) return undefined;
  try {
    const url = new URL(candidate);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}

/** What every outbound link carries: no window handle and no referrer for the other side. */
export const OUTBOUND_REL = 'noopener noreferrer';
