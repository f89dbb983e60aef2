/** `RUNTASKS_EMBEDDED`: whether a one-machine start may run a PostgreSQL or Redis of its own. */
export type EmbeddedMode = 'auto' | 'always' | 'never';

/**
 * A service is embedded only when its URL is left unset: a URL names the server to use, whatever the
 * mode. Then `always` embeds, and `auto` embeds only when nothing answers at the default address (a
 * developer's own server there is used as before).
 */
export function shouldEmbed(mode: EmbeddedMode, urlSet: boolean, defaultAnswers: boolean): boolean {
  if (mode === 'never' || urlSet) return false;
  return mode === 'always' || !defaultAnswers;
}

/** Whether to look at the default address at all: only `auto` with the URL unset asks. */
export function needsProbe(mode: EmbeddedMode, urlSet: boolean): boolean {
  return mode === 'auto' && !urlSet;
}
