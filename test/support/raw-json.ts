import fc from 'fast-check';

/**
 * Request bodies as JSON values with Raw fragments spliced in verbatim (deep nesting, invalid UTF-8,
 * `__proto__` keys), so no test code ever builds or walks a hostile structure itself, nor has to
 * produce invalid UTF-8 from a string.
 */

/** Bytes that `encode` writes as they are, where the value stands. */
export class Raw {
  readonly bytes: Buffer;
  constructor(bytes: Buffer | string) {
    this.bytes = typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes;
  }
  /** How fast-check shows the fragment in a counterexample. */
  [fc.toStringMethod](): string {
    const preview = this.bytes.subarray(0, 40).toString('latin1');
    return `Raw(${this.bytes.length} bytes: ${JSON.stringify(preview)}${this.bytes.length > 40 ? '…' : ''})`;
  }
}

const PLACEHOLDER = /"\\u0001raw(\d+)\\u0001"/g;

/** JSON.stringify, with every Raw fragment replaced by its bytes; no bytes for a value JSON cannot encode (undefined). */
export function encode(body: unknown): Buffer {
  const raws: Raw[] = [];
  const text = JSON.stringify(body, (_key, value: unknown) => {
    if (value instanceof Raw) {
      raws.push(value);
      return `\u0001raw${raws.length - 1}\u0001`;
    }
    return value;
  });
  if (text === undefined) return Buffer.alloc(0);
  const parts = text.split(PLACEHOLDER);
  return Buffer.concat(parts.map((part, index) => (index % 2 === 0 ? Buffer.from(part, 'utf8') : (raws[Number(part)] as Raw).bytes)));
}
