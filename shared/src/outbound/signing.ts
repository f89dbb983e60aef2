import { createHmac } from 'node:crypto';

/**
 * `X-TFC-Task-Signature`: lowercase hex HMAC-SHA512 of the exact bytes sent, or the empty string when
 * the task has no key (HCP sends the header either way).
 */
export function taskSignature(body: Buffer, hmacKey: string | null): string {
  if (!hmacKey) return '';
  return createHmac('sha512', hmacKey).update(body).digest('hex');
}
