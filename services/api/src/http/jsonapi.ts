/** JSON:API document shapes as HCP Terraform emits them (kebab-case attributes, `links.self`). */
export const MEDIA_TYPE = 'application/vnd.api+json';
export const API_PREFIX = '/api/v2';

export interface ResourceIdentifier {
  id: string;
  type: string;
}

export interface Relationship {
  data: ResourceIdentifier | ResourceIdentifier[] | null;
  links?: Record<string, string>;
}

export interface Resource {
  id: string;
  type: string;
  attributes: Record<string, unknown>;
  relationships?: Record<string, Relationship>;
  links?: { self: string } & Record<string, string>;
}

export interface PaginationMeta {
  'current-page': number;
  'page-size': number;
  'prev-page': number | null;
  'next-page': number | null;
  'total-pages': number;
  'total-count': number;
}

export interface Document {
  data: Resource | Resource[] | null;
  included?: Resource[];
  links?: Record<string, string | null>;
  meta?: { pagination?: PaginationMeta } & Record<string, unknown>;
}

export const toOne = (type: string, id: string | null | undefined): Relationship => ({
  data: id ? { id, type } : null,
});

export const toMany = (type: string, ids: readonly string[]): Relationship => ({
  data: ids.map((id) => ({ id, type })),
});

/** `…Z` with milliseconds: go-tfe's iso8601 layout requires the literal Z. */
export const timestamp = (date: Date | null | undefined): string | null => (date ? date.toISOString() : null);

export const selfLink = (path: string): { self: string } => ({ self: `${API_PREFIX}${path}` });

/** Deduplicates included resources by type and id, keeping the first. */
export function uniqueResources(resources: readonly Resource[]): Resource[] {
  const seen = new Set<string>();
  return resources.filter((resource) => {
    const key = `${resource.type}/${resource.id}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

export function single(resource: Resource, included: readonly Resource[] = []): Document {
  const document: Document = { data: resource };
  if (included.length > 0) document.included = uniqueResources(included);
  return document;
}
