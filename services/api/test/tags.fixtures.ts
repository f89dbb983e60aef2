import { expect } from '@jest/globals';
import type { Response } from '../../../test/support/assertions.ts';

/** Shapes and bodies the workspace and organization tag tests share. */

export const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
export const TAG_ID = /^tag-[A-Za-z0-9]{16}$/;

export const byName = (...names: string[]) => ({ data: names.map((name) => ({ type: 'tags', attributes: { name } })) });
export const byId = (...ids: string[]) => ({ data: ids.map((id) => ({ type: 'tags', id })) });
export const tagNamesIn = (res: Response): string[] =>
  (res.body.data as { attributes: { name: string } }[]).map((tag) => tag.attributes.name);
