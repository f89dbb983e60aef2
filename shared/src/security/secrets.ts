import { createCipheriv, createDecipheriv, createHash, createHmac, createSecretKey, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Server-side secrets. API and callback tokens are 256-bit random values stored only as keyed hashes;
 * HMAC keys must be usable for signing, so they are encrypted (AES-256-GCM), never hashed.
 */
export interface SecretBox {
  hashToken(token: string): string;
  encrypt(plaintext: string): string;
  decrypt(envelope: string): string;
  /**
   * A token (the shape `generateToken` makes) bound to `subject`: 128 random bits, then a 128-bit MAC
   * of them with the prefix and subject under a key of its own, so whether a presented token was
   * issued for a subject is known without a lookup (its hash still has to match the stored one).
   */
  bindToken(prefix: string, subject: string): string;
  /** Whether `token` was made by `bindToken(prefix, subject)` under this secret (constant time). */
  isBoundTo(token: string, prefix: string, subject: string): boolean;
  /**
   * The one token of `subject` under this secret: the subject itself, then a 256-bit MAC of it with
   * the prefix under a key of its own. Nothing has to be stored to check it, nor to send it again.
   */
  deriveToken(prefix: string, subject: string): string;
  /** The subject `token` was derived for (deriveToken) under this secret, or undefined (constant-time MAC check). */
  derivedSubject(token: string, prefix: string): string | undefined;
}

export const API_TOKEN_PREFIX = 'rtk_';
export const CALLBACK_TOKEN_PREFIX = 'rtcb_';

export function generateToken(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}

/** Any token we accept: generated ones, and operator-chosen ADMIN_TOKEN values (letters, digits, - and _). */
export const PLAUSIBLE_TOKEN = /^[A-Za-z0-9_-]{20,256}$/;

/** Cheap shape check so obviously malformed tokens never reach the database. */
export function isPlausibleToken(value: string): boolean {
  return PLAUSIBLE_TOKEN.test(value);
}

/** Whether a value has the exact shape of a token this service generated with `prefix`. */
export function looksLikeToken(value: string, prefix: string): boolean {
  return value.startsWith(prefix) && /^[A-Za-z0-9_-]{43}$/.test(value.slice(prefix.length));
}

const BOUND_NONCE_BYTES = 16;
const BOUND_MAC_BYTES = 16;
const DERIVED_MAC_BYTES = 32;
/** What a derived token's subject may be: an id (shared/src/domain/ids.ts), never empty, never long. */
const DERIVED_SUBJECT = /^[a-z]{1,16}-[A-Za-z0-9]{1,64}$/;

export function createSecretBox(secretKey: string): SecretBox {
  // Separate derived keys so a hash can never be used as an encryption key or the other way round.
  // KeyObjects made once: createHmac and createCipheriv with a raw Buffer import the key again on every
  // call (docs/design.md, "Smaller choices").
  const hashKey = createSecretKey(createHash('sha256').update(`runtasks:token-hash:${secretKey}`).digest());
  const encryptionKey = createSecretKey(createHash('sha256').update(`runtasks:encryption:${secretKey}`).digest());
  const bindingKey = createSecretKey(createHash('sha256').update(`runtasks:token-binding:${secretKey}`).digest());
  const derivationKey = createSecretKey(createHash('sha256').update(`runtasks:token-derivation:${secretKey}`).digest());
  const derivationMac = (prefix: string, subject: string): Buffer =>
    createHmac('sha256', derivationKey).update(`${prefix}\u0000${subject}`).digest();
  const bindingMac = (prefix: string, subject: string, nonce: Buffer): Buffer =>
    createHmac('sha256', bindingKey).update(`${prefix}\u0000${subject}\u0000`).update(nonce).digest().subarray(0, BOUND_MAC_BYTES);
  return {
    hashToken: (token) => createHmac('sha256', hashKey).update(token).digest('hex'),
    encrypt(plaintext) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', encryptionKey, iv);
      const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join('.');
    },
    decrypt(envelope) {
      const [version, iv, tag, ciphertext] = envelope.split('.');
      if (version !== 'v1' || !iv || !tag || ciphertext === undefined) throw new Error('unknown secret envelope');
      // A fixed tag length: without it GCM accepts a truncated (4-byte) tag, which makes forgery cheap.
      const decipher = createDecipheriv('aes-256-gcm', encryptionKey, Buffer.from(iv, 'base64url'), { authTagLength: 16 });
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
    },
    bindToken(prefix, subject) {
      const nonce = randomBytes(BOUND_NONCE_BYTES);
      return prefix + Buffer.concat([nonce, bindingMac(prefix, subject, nonce)]).toString('base64url');
    },
    isBoundTo(token, prefix, subject) {
      if (!looksLikeToken(token, prefix)) return false;
      const bytes = Buffer.from(token.slice(prefix.length), 'base64url');
      if (bytes.length !== BOUND_NONCE_BYTES + BOUND_MAC_BYTES) return false;
      return timingSafeEqual(bytes.subarray(BOUND_NONCE_BYTES), bindingMac(prefix, subject, bytes.subarray(0, BOUND_NONCE_BYTES)));
    },
    deriveToken(prefix, subject) {
      if (!DERIVED_SUBJECT.test(subject)) throw new Error('not a subject a token can be derived for');
      return prefix + Buffer.concat([Buffer.from(subject, 'utf8'), derivationMac(prefix, subject)]).toString('base64url');
    },
    derivedSubject(token, prefix) {
      if (!token.startsWith(prefix) || !PLAUSIBLE_TOKEN.test(token)) return undefined;
      const bytes = Buffer.from(token.slice(prefix.length), 'base64url');
      // One spelling per token: base64url's last character can carry unused bits.
      if (bytes.length <= DERIVED_MAC_BYTES || bytes.toString('base64url') !== token.slice(prefix.length)) return undefined;
      const subject = bytes.subarray(0, bytes.length - DERIVED_MAC_BYTES).toString('latin1');
      if (!DERIVED_SUBJECT.test(subject)) return undefined;
      return timingSafeEqual(bytes.subarray(bytes.length - DERIVED_MAC_BYTES), derivationMac(prefix, subject)) ? subject : undefined;
    },
  };
}

/**
 * A task result's callback access token. Since issue 47 it is derived from the result's id under the
 * server's secret (`SecretBox.deriveToken`): nothing is stored (`hash` and `encrypted` are null), every
 * delivery of the result sends the same one, and the API checks it, and finds its result, without a
 * lookup. A result planned before keeps the token stored for it (hashed for lookup, encrypted to send
 * again), and its callbacks and plan JSON reads are checked against that one, as before.
 */
export interface CallbackToken {
  token: string;
  hash: string | null;
  encrypted: string | null;
}

/** Issues a result's access token (see CallbackToken). */
export type CallbackTokenIssuer = (resultId: string) => CallbackToken;

export function issueCallbackToken(secrets: SecretBox, resultId: string): CallbackToken {
  return { token: secrets.deriveToken(CALLBACK_TOKEN_PREFIX, resultId), hash: null, encrypted: null };
}

/**
 * What a callback's statement compares with its result's stored token hash (coalesced to this) for a
 * token derived for that result: only a result that has no stored token takes a derived one.
 */
export const DERIVED_TOKEN_HASH = '';

export function safeEqualHex(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
