// Secrets: token hashes, encryption of HMAC keys, the key they are sealed with.
export * from './secrets.ts';
export * from './secret-key.ts';
