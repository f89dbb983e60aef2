import type { ApiDeps } from '../context.ts';
import { createIdentityVerifier, type IdentityVerifier } from './identity-verifier.ts';

/** One verifier per app (its issuers' discovery documents and keys are kept in it). */
const verifiers = new WeakMap<ApiDeps, IdentityVerifier>();

export function identityVerifierOf(deps: ApiDeps): IdentityVerifier {
  let verifier = verifiers.get(deps);
  if (!verifier) {
    verifier = createIdentityVerifier({ issuers: deps.config.ciTokenIssuers });
    verifiers.set(deps, verifier);
  }
  return verifier;
}
