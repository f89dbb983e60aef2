/** The organization document the tests send. */

export function organizationDocument(attributes: Record<string, unknown>) {
  return { data: { type: 'organizations', attributes } };
}
