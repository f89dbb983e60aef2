import { describe } from '@jest/globals';
import { describeRouteTable } from './isolation/route-table.ts';
import { describeTokenMatrix } from './isolation/matrix.ts';
import { describeBeyondTheMatrix } from './isolation/beyond.ts';
import { useIsolation } from './isolation/setup.ts';

/**
 * The isolation matrix, generated from the route table: every token route is called without a
 * token, with garbage and revoked tokens, with another organization's owner token, with a team token
 * that has no permissions, and with nonexistent ids. A route with a path parameter (or a POST/PATCH
 * route without a request body) the tables in isolation/ (bodies.ts, exceptions.ts) do not know fails
 * the first test, so a new route cannot slip past the matrix. Site-admin routes answer every
 * organization and team token like a missing resource; the one public route with a body (the
 * configuration upload URL, a bearer capability) has its own tests (isolation/beyond.ts).
 */
describe('isolation matrix', () => {
  const g = useIsolation();
  describeRouteTable(g);
  describeTokenMatrix(g);
  describeBeyondTheMatrix(g);
});
