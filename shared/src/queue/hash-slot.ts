/**
 * Redis Cluster's key slots: a key's slot is CRC16 (XMODEM) of its hash tag, or of the whole key when it
 * has none, modulo 16384. BullMQ's scripts touch several keys of a queue at once, which a cluster runs
 * only when they all lie in one slot: with a `{tag}` in QUEUE_PREFIX every key of the queue does.
 */
export const CLUSTER_SLOTS = 16_384;

/** CRC16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster uses for key slots. */
export function crc16(data: Uint8Array): number {
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit += 1) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc;
}

/** The part of `key` the cluster hashes: between the first `{` and the next `}`, when not empty. */
export function hashTagOf(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open === -1) return undefined;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/** The cluster slot of a key. */
export function keySlot(key: string): number {
  return crc16(Buffer.from(hashTagOf(key) ?? key)) % CLUSTER_SLOTS;
}
