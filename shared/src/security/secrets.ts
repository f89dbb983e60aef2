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

export function createSecretBox(secretKey: string): SecretBox {
  // Separate derived keys so a hash can never be used as an encryption key or the other way round.
  // KeyObjects made once: createHmac and createCipheriv with a raw Buffer import the key again on every
  // call (docs/design.md, "Smaller choices").
  const hashKey = createSecretKey(createHash('sha256').update(`runtasks:token-hash:${secretKey}`).digest());
  const encryptionKey = createSecretKey(createHash('sha256').update(`runtasks:encryption:${secretKey}`).digest());
  const bindingKey = createSecretKey(createHash('sha256').update(`runtasks:token-binding:${secretKey}`).digest());
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
  };
}

/**
 * A task result's callback access token: stored hashed (for lookup) and encrypted (so every delivery of
 * the result sends the same one). Bound to its result, so the API checks a callback's token before
 * reading its body without a lookup.
 */
export interface CallbackToken {
  token: string;
  hash: string;
  encrypted: string;
}

/** Issues a result's access token (see CallbackToken). */
export type CallbackTokenIssuer = (resultId: string) => CallbackToken;

export function issueCallbackToken(secrets: SecretBox, resultId: string): CallbackToken {
  const token = secrets.bindToken(CALLBACK_TOKEN_PREFIX, resultId);
  return { token, hash: secrets.hashToken(token), encrypted: secrets.encrypt(token) };
}

export function safeEqualHex(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
