import { describe, expect, it } from '@jest/globals';
import { isCompressible } from './compression.ts';

describe('what is compressed', () => {
  it.each([
    ['text/html; charset=utf-8', true],
    ['text/css; charset=utf-8', true],
    ['text/javascript; charset=utf-8', true],
    ['text/plain; version=0.0.4; charset=utf-8', true],
    ['application/json; charset=utf-8', true],
    ['application/vnd.api+json', true],
    ['application/problem+json', true],
    ['application/javascript', true],
    ['image/svg+xml', true],
    ['application/octet-stream', false],
    ['application/gzip', false],
    ['application/zip', false],
    ['image/png', false],
    ['', false],
  ])('%s → %s', (type, expected) => {
    expect(isCompressible(type)).toBe(expected);
  });
});
