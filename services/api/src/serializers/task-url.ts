/**
 * A task URL as readers of tasks and runs see it: without a user name or password. URLs with them are
 * refused now, but tasks (and the results that snapshot their URL) stored before may hold some, which
 * were never sent and must not be shown to everyone who can read a run.
 */
export function shownTaskUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  if (parsed.username === '' && parsed.password === '') return url;
  parsed.username = '';
  parsed.password = '';
  return parsed.href;
}
