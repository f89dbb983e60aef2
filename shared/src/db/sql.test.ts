import { describe, expect, it } from '@jest/globals';
import { ID_PREFIX, newId, type IdKind } from '@runtasks/shared/domain';
import { idList } from './sql.ts';

describe('idList: ids read as one comma-joined text', () => {
  it('reads no ids from the empty text', () => {
    expect(idList('')).toEqual([]);
  });

  it('gives back every kind of id the service makes, in order', () => {
    const kinds = Object.keys(ID_PREFIX) as IdKind[];
    for (let count = 1; count <= 5; count += 1) {
      const ids = kinds.flatMap((kind) => Array.from({ length: count }, () => newId(kind)));
      expect(idList(ids.join(','))).toEqual(ids);
    }
  });
});
