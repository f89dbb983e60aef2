import type { Config } from '@runtasks/shared/config';
import { RelyingParty } from './relying-party.ts';

/** One relying party per configuration (so per process): its provider's metadata is discovered once. */
const parties = new WeakMap<Config, RelyingParty>();

/** This service's relying party, or nothing where single sign-on is not configured. */
export function relyingPartyOf(config: Config): RelyingParty | undefined {
  const settings = config.oidc;
  if (!settings) return undefined;
  let party = parties.get(config);
  if (!party || party.settings !== settings) {
    // The public address is read per request: the configuration may be adjusted after start (tests do).
    party = new RelyingParty(settings, () => config.publicBaseUrl);
    parties.set(config, party);
  }
  return party;
}
