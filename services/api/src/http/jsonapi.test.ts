import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { isoFromPostgres, timestamp } from './jsonapi.ts';

/** A timestamptz as PostgreSQL prints it in UTC: microseconds, trailing zeros of the fraction dropped. */
function postgresText(epochMicroseconds: number): string {
  const date = new Date(Math.floor(epochMicroseconds / 1000));
  const [day, time] = date.toISOString().slice(0, 19).split('T');
  const fraction = String(((epochMicroseconds % 1_000_000) + 1_000_000) % 1_000_000)
    .padStart(6, '0')
    .replace(/0+$/, '');
  return `${day} ${time}${fraction === '' ? '' : `.${fraction}`}+00`;
}

describe('isoFromPostgres', () => {
  it('is what new Date(text).toISOString() gives, for any UTC timestamp PostgreSQL prints from year 100 on (property)', () => {
    const from = Date.UTC(100, 0, 1) * 1000;
    const to = Date.UTC(9999, 11, 31, 23, 59, 59) * 1000;
    fc.assert(
      fc.property(fc.integer({ min: from, max: to }), (epochMicroseconds) => {
        const text = postgresText(epochMicroseconds);
        expect(isoFromPostgres(text)).toBe(new Date(text).toISOString());
      }),
      { numRuns: 5000 },
    );
  });

  it.each([
    ['2026-11-25 06:53:57.123456+00', '2026-11-25T06:53:57.123Z'],
    ['2026-11-25 06:53:57.123956+00', '2026-11-25T06:53:57.123Z'],
    ['2026-11-25 06:53:57.1+00', '2026-11-25T06:53:57.100Z'],
    ['2026-11-25 06:53:57.0005+00', '2026-11-25T06:53:57.000Z'],
    ['2026-11-25 06:53:57+00', '2026-11-25T06:53:57.000Z'],
    // Not UTC text: read as a Date, as before.
    ['2026-11-25 07:53:57.25+01', '2026-11-25T06:53:57.250Z'],
    ['2026-11-25 12:23:57+05:30', '2026-11-25T06:53:57.000Z'],
  ])('%s → %s', (text, iso) => {
    expect(isoFromPostgres(text)).toBe(iso);
    expect(new Date(text).toISOString()).toBe(iso);
  });

  it('reads a year before 100 as written, where a Date takes it for the 20th century', () => {
    expect(isoFromPostgres('0050-03-04 05:06:07.891+00')).toBe('0050-03-04T05:06:07.891Z');
  });

  it('text that is no timestamp throws, as a Date of it would', () => {
    expect(() => isoFromPostgres('yesterday')).toThrow(RangeError);
  });
});

describe('timestamp', () => {
  it('prints a Date and PostgreSQL text alike, and nothing as null', () => {
    expect(timestamp(new Date('2026-11-25T06:53:57.123Z'))).toBe('2026-11-25T06:53:57.123Z');
    expect(timestamp('2026-11-25 06:53:57.123456+00')).toBe('2026-11-25T06:53:57.123Z');
    expect(timestamp(null)).toBeNull();
    expect(timestamp(undefined)).toBeNull();
  });
});
