import { z } from 'zod';
import { safeText } from './schemas.ts';

/** HCP's rule for tag names: 1 to 255 letters, numbers, colons, hyphens and underscores. */
export const TAG_NAME_PATTERN = /^[A-Za-z0-9:_-]+$/;
export const TAG_NAME_MAX = 255;
/** How many tags one request may name: a bound on the work one request asks for. */
export const TAGS_PER_REQUEST = 100;

export const tagName = z
  .string()
  .min(1, 'must not be empty')
  .max(TAG_NAME_MAX, `must be at most ${TAG_NAME_MAX} characters`)
  .regex(TAG_NAME_PATTERN, 'may only contain letters, numbers, colons, hyphens and underscores');

/**
 * A tag as go-tfe sends one: by id (a tag the organization has) or by name (created when new). With
 * both, the id decides.
 */
export const tagReference = z
  .object({
    type: z.literal('tags'),
    id: safeText(64).min(1, 'must not be empty').optional(),
    attributes: z.object({ name: tagName.optional() }).optional(),
  })
  .refine((tag) => tag.id !== undefined || tag.attributes?.name !== undefined, 'must have an id or a name');

export type TagReference = z.output<typeof tagReference>;

const bounded = <T extends z.ZodType>(item: T) => z.array(item).max(TAGS_PER_REQUEST, `must list at most ${TAGS_PER_REQUEST} entries`);

/** The `tags` relationship of a workspace document (create and update). */
export const tagsRelationship = z.object({ data: bounded(tagReference) });

/** The `tag-names` attribute of a workspace document (create and update). */
export const tagNamesAttribute = bounded(tagName);

/** POST and DELETE /workspaces/:id/relationships/tags: at least one tag. */
export const tagListDocument = z.object({ data: bounded(tagReference).min(1, 'must list at least one tag') });

/** DELETE /organizations/:name/tags: the tags by id. */
export const tagIdsDocument = z.object({
  data: bounded(z.object({ type: z.literal('tags'), id: safeText(64).min(1, 'must not be empty') })).min(1, 'must list at least one tag'),
});

/** POST /tags/:id/relationships/workspaces: the workspaces by id. */
export const workspaceIdsDocument = z.object({
  data: bounded(z.object({ type: z.literal('workspaces'), id: safeText(64).min(1, 'must not be empty') })).min(
    1,
    'must list at least one workspace',
  ),
});
