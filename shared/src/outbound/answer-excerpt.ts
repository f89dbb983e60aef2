/** How much of a task server's answer is kept for people to read: delivery attempts, a failed verification. */
export const ANSWER_EXCERPT_LIMIT = 2048;

/**
 * The first characters of a task server's answer, for the people who read it: every secret cut out
 * wherever the server echoed it (an access token, an HMAC key), and NUL, which PostgreSQL refuses in
 * text, replaced. Secrets are cut out before the excerpt is cut short, so no part of one at the cut stays.
 */
export function answerExcerpt(text: string, secrets: readonly string[], limit = ANSWER_EXCERPT_LIMIT): string {
  const present = secrets.filter((secret) => secret !== '');
  let window = text.slice(0, limit + Math.max(0, ...present.map((secret) => secret.length)));
  for (const secret of present) window = window.replaceAll(secret, '[redacted]');
  return window.slice(0, limit).replaceAll('\u0000', '\uFFFD');
}
