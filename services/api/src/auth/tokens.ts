import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '@runtasks/shared/domain';
import { ApiToken, type TokenKind } from '@runtasks/shared/db';
import { API_TOKEN_PREFIX, generateToken, type SecretBox } from '@runtasks/shared/security';

export interface IssuedToken {
  token: ApiToken;
  /** The plaintext, returned to the caller once and never stored. */
  secret: string;
}

interface IssueOptions {
  kind: TokenKind;
  organizationId?: string;
  teamId?: string;
  /** A user token's user; a user may hold any number of tokens. */
  userId?: string;
  description?: string | null;
  expiresAt?: Date | null;
  /** Who creates it: the acting principal's user id (actor.ts). */
  createdBy?: string | null;
}

/**
 * Issues a token. Organization and team tokens are one per owner, as in HCP: issuing a new one
 * revokes the previous in the same transaction. A user holds as many user tokens as they make.
 */
export async function issueToken(em: EntityManager, secrets: SecretBox, options: IssueOptions): Promise<IssuedToken> {
  const secret = generateToken(API_TOKEN_PREFIX);
  return em.transactional(async (tx) => {
    if (options.kind === 'organization' && options.organizationId) {
      await tx.nativeUpdate(
        ApiToken,
        { kind: 'organization', organization: options.organizationId, revokedAt: null },
        { revokedAt: new Date() },
      );
    }
    if (options.kind === 'team' && options.teamId) {
      await tx.nativeUpdate(ApiToken, { kind: 'team', team: options.teamId, revokedAt: null }, { revokedAt: new Date() });
    }
    const token = tx.create(ApiToken, {
      id: newId('token'),
      kind: options.kind,
      organization: options.organizationId ?? null,
      team: options.teamId ?? null,
      user: options.userId ?? null,
      tokenHash: secrets.hashToken(secret),
      description: options.description ?? null,
      expiresAt: options.expiresAt ?? null,
      createdBy: options.createdBy ?? null,
    });
    await tx.flush();
    return { token, secret };
  });
}

/** Makes ADMIN_TOKEN usable, idempotently: the same value on every start maps to one row. */
export async function ensureAdminToken(em: EntityManager, secrets: SecretBox, secret: string): Promise<void> {
  const tokenHash = secrets.hashToken(secret);
  await em
    .getConnection()
    .execute(
      `insert into api_tokens (id, kind, token_hash, description, created_at) values (?, 'admin', ?, 'ADMIN_TOKEN', now()) on conflict (token_hash) do nothing`,
      [newId('token'), tokenHash],
    );
}

export async function hasActiveAdminToken(em: EntityManager): Promise<boolean> {
  return (await em.count(ApiToken, { kind: 'admin', revokedAt: null })) > 0;
}
