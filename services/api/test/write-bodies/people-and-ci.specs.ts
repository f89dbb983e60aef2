import { Organization } from '@runtasks/shared/db';
import { api, createTeam } from '../../../../test/support/fixtures.ts';
import { uniqueName } from '../../../../test/support/assertions.ts';
import { issueToken } from '../../src/auth/tokens.ts';
import { addMembership, createUser } from '../../src/services/users.service.ts';
import { datetime, FUTURE, list, literal, object, oneOf, resourceFields, str, type WriteSpec } from './model.ts';
import { describeResponse } from './hostile.ts';
import { type Fixtures } from './fixtures.ts';
import { type TestIssuer } from '../../../../test/support/oidc-issuer.ts';

/** The issuer the CI trust rules name: CI_TOKEN_ISSUERS of the write-bodies harness (fixtures.ts). */
export const CI_ISSUER = 'https://token.actions.githubusercontent.com';

/** WriteSpecs: a person's account and tokens, memberships and team members, CI trust rules and the exchange. */
export async function addPeopleAndCiSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures, issuer: TestIssuer): Promise<void> {
  await addPeopleSpecs(SPECS, f);
  await addCiTrustRuleSpecs(SPECS, f);
  await addExchangeSpec(SPECS, f, issuer);
}

/**
 * People of the main organization: one accepted, with a token; one only invited, with a token; one more
 * accepted (added to teams by username); and one of no organization, whose username and email are taken.
 */
async function people(f: Fixtures) {
  const em = f.em();
  const organization = await em.findOneOrFail(Organization, { name: f.main });
  const member = await createUser(em, { email: 'prop-member@example.test', username: 'prop-member' });
  const invitee = await createUser(em, { email: 'prop-invitee@example.test', username: 'prop-invitee' });
  const taken = await createUser(em, { email: 'prop-taken@example.test', username: 'prop-taken' });
  // The team members' specs add this one by username: not the account's person, whom a hostile body may rename.
  const crew = await createUser(em, { email: 'prop-crew@example.test', username: 'prop-crew' });
  await em.flush();
  const memberMembership = await addMembership(em, organization.id, member, 'active');
  await addMembership(em, organization.id, crew, 'active');
  const inviteeMembership = await addMembership(em, organization.id, invitee);
  await em.flush();
  const memberToken = (await issueToken(em, f.h.secrets, { kind: 'user', userId: member.id })).secret;
  const inviteeToken = (await issueToken(em, f.h.secrets, { kind: 'user', userId: invitee.id })).secret;
  return {
    member,
    invitee,
    taken,
    memberMembership: memberMembership.id,
    inviteeMembership: inviteeMembership.id,
    memberToken,
    inviteeToken,
  };
}

async function addPeopleSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures): Promise<void> {
  const { admin, h, main, patched, teamPatched } = f;
  const p = await people(f);

  // -- the person's own account: only their own token changes it; a taken name or address is refused whole.
  const account = (attributes: Record<string, unknown>, token = p.memberToken) => ({
    path: '/account/update',
    body: { data: { type: 'users', attributes } },
    token,
  });
  SPECS['PATCH /account/update'] = {
    attributes: '/data/attributes',
    fields: resourceFields('users', { username: str('name', 255), email: str('email', 255) }),
    required: ['/data', '/data/type'],
    success: 200,
    base: async () => account({ username: 'prop-member', email: 'prop-member@example.test' }),
    fresh: async () => account({ username: 'prop-member', email: 'prop-member@example.test' }),
    failures: [
      async () => account({ username: 'prop-taken', email: 'prop-member-renamed@example.test' }),
      async () => account({ email: 'PROP-taken@example.test' }),
      // A token that is nobody's has no account to change (404).
      async () => ({ ...account({ username: 'prop-nobody' }), token: admin }),
    ],
  };

  // -- a person's tokens, made by the site admin (who gives an invited person their first).
  const tokenDocument = (userId: string, attributes: Record<string, unknown>) => ({
    path: `/users/${userId}/authentication-tokens`,
    body: { data: { type: 'authentication-tokens', attributes } },
  });
  SPECS['POST /users/:user_id/authentication-tokens'] = {
    attributes: '/data/attributes',
    fields: {
      ...resourceFields('authentication-tokens', { description: str('text', 255, { nullable: true }), 'expired-at': datetime(true) }),
      // go-tfe's "" and HCP's documented singular are accepted as well.
      '/data/type': oneOf(['', 'authentication-token', 'authentication-tokens']),
    },
    required: ['/data/type'],
    success: 201,
    base: async () => tokenDocument(p.member.id, { description: 'base', 'expired-at': FUTURE }),
    fresh: async () => tokenDocument(p.invitee.id, { description: 'fresh', 'expired-at': FUTURE }),
    failures: [
      async () => tokenDocument('user-doesnotexist00000', { description: 'nobody' }),
      // Another person may not make tokens for them (404, as if they did not exist).
      async () => ({ ...tokenDocument(p.invitee.id, { description: 'not mine' }), token: p.memberToken }),
    ],
  };

  // -- invitations: the base invites a member already, so a hostile body that stays valid changes nothing.
  const teamOfPatched = await createTeam(h, patched, admin, 'team-prop-foreign');
  const invitation = (email: string, teams: string[] = [], organization = main) => ({
    path: `/organizations/${organization}/organization-memberships`,
    body: {
      data: {
        type: 'organization-memberships',
        attributes: { email },
        relationships: { teams: { data: teams.map((id) => ({ type: 'teams', id })) } },
      },
    },
  });
  SPECS['POST /organizations/:organization_name/organization-memberships'] = {
    attributes: '/data/attributes',
    fields: resourceFields(
      'organization-memberships',
      { email: str('email', 255) },
      {
        '': object(),
        teams: object(),
        'teams/data': list(),
        'teams/data/0': object(),
        'teams/data/0/type': literal('teams'),
        'teams/data/0/id': str('id', 64),
      },
    ),
    required: ['/data', '/data/type', '/data/attributes', '/data/attributes/email'],
    success: 201,
    base: async () => invitation('prop-member@example.test', [teamPatched]),
    fresh: async () => invitation(`${uniqueName('prop-invited')}@example.test`, [teamPatched]),
    failures: [
      async () => invitation('PROP-Member@example.test'),
      async () => invitation(`${uniqueName('prop-foreign')}@example.test`, [teamOfPatched]),
      async () => invitation(`${uniqueName('prop-ghost')}@example.test`, ['team-doesnotexist000']),
      async () => invitation(`${uniqueName('prop-nowhere')}@example.test`, [], 'no-such-organization'),
      // Only owners invite.
      async () => ({ ...invitation(`${uniqueName('prop-uninvited')}@example.test`), token: p.memberToken }),
    ],
  };

  // -- team members, by username (accepted members only) and by membership id (invitees too); both idempotent (204).
  const crew = await createTeam(h, main, admin, 'team-prop-crew');
  const members = (kind: 'users' | 'organization-memberships', ids: string[], team = crew) => ({
    path: `/teams/${team}/relationships/${kind}`,
    body: { data: ids.map((id) => ({ type: kind, id })) },
  });
  const membersSpec = (kind: 'users' | 'organization-memberships', id: string, failures: (() => Promise<ReturnType<typeof members>>)[]) =>
    ({
      attributes: '/data/0',
      fields: { '/data': list(), '/data/0': object(), '/data/0/type': literal(kind), '/data/0/id': str('id', 255) },
      required: ['/data', '/data/0/type', '/data/0/id'],
      success: 204,
      base: async () => members(kind, [id]),
      fresh: async () => members(kind, [id]),
      failures: [
        ...failures,
        async () => members(kind, [id], 'team-doesnotexist000'),
        async () => members(kind, []),
        // Only owners change a team's members.
        async () => ({ ...members(kind, [id]), token: p.memberToken }),
      ],
    }) satisfies WriteSpec;
  SPECS['POST /teams/:team_id/relationships/users'] = membersSpec('users', 'prop-crew', [
    async () => members('users', ['prop-crew', 'prop-nobody-here']),
    // Invited, not yet accepted.
    async () => members('users', ['prop-invitee']),
    // A person of no membership here.
    async () => members('users', ['prop-taken']),
  ]);
  SPECS['POST /teams/:team_id/relationships/organization-memberships'] = membersSpec('organization-memberships', p.inviteeMembership, [
    async () => members('organization-memberships', [p.inviteeMembership, 'ou-doesnotexist000000']),
    // A team of another organization.
    async () => members('organization-memberships', [p.memberMembership], teamOfPatched),
  ]);

  // -- accepting: no body (or `{}`); the member's own accepted membership answers 200 and changes nothing.
  const accept = (membershipId: string, token = p.memberToken) => ({
    path: `/organization-memberships/${membershipId}/actions/accept`,
    body: {},
    token,
  });
  SPECS['POST /organization-memberships/:organization_membership_id/actions/accept'] = {
    attributes: '',
    fields: {},
    required: [],
    success: 200,
    base: async () => accept(p.memberMembership),
    fresh: async () => accept(p.memberMembership),
    failures: [
      // Nobody accepts for another: the invitee's membership with the member's token, or an owner's.
      async () => accept(p.inviteeMembership),
      async () => accept(p.inviteeMembership, admin),
      async () => accept('ou-doesnotexist000000'),
    ],
  };
}

/** CI trust rules of a workspace: the issuer must be one the site admin allows (CI_ISSUER here). */
async function addCiTrustRuleSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures): Promise<void> {
  const { admin, h, workspace } = f;
  const ruleFields = resourceFields('ci-trust-rules', {
    issuer: str('text', 255, { nonEmpty: true }),
    audience: str('text', 255, { nonEmpty: true }),
    claims: object(),
  });
  const rule = (attributes: Record<string, unknown>) => ({ data: { type: 'ci-trust-rules', attributes } });
  const valid = { issuer: CI_ISSUER, audience: 'https://prop.example.test', claims: { repository: 'octo/app', ref: 'refs/heads/*' } };
  const wsRules = await workspace('ws-ci-rules');
  const created = await api(h, 'post', `/workspaces/${wsRules}/ci-trust-rules`, admin, rule(valid));
  if (created.status !== 201) throw new Error(`create a CI trust rule: ${describeResponse(created)}`);
  const ruleId = created.body.data.id as string;

  SPECS['POST /workspaces/:workspace_id/ci-trust-rules'] = {
    attributes: '/data/attributes',
    fields: ruleFields,
    required: ['/data', '/data/type', '/data/attributes', '/data/attributes/issuer', '/data/attributes/claims'],
    success: 201,
    base: async () => ({ path: `/workspaces/${wsRules}/ci-trust-rules`, body: rule(valid) }),
    // A workspace of its own each time: a workspace holds at most 50 rules.
    fresh: async () => ({ path: `/workspaces/${await workspace(uniqueName('ws-ci-fresh'))}/ci-trust-rules`, body: rule(valid) }),
    failures: [
      async () => ({ path: `/workspaces/${wsRules}/ci-trust-rules`, body: rule({ ...valid, issuer: 'https://gitlab.example.test' }) }),
      async () => ({ path: '/workspaces/ws-doesnotexist00000/ci-trust-rules', body: rule(valid) }),
    ],
  };
  SPECS['PATCH /ci-trust-rules/:rule_id'] = {
    attributes: '/data/attributes',
    fields: ruleFields,
    required: ['/data', '/data/type', '/data/attributes'],
    success: 200,
    base: async () => ({ path: `/ci-trust-rules/${ruleId}`, body: rule(valid) }),
    fresh: async () => ({ path: `/ci-trust-rules/${ruleId}`, body: rule({ audience: valid.audience, claims: valid.claims }) }),
    failures: [
      async () => ({ path: `/ci-trust-rules/${ruleId}`, body: rule({ ...valid, issuer: 'https://gitlab.example.test' }) }),
      async () => ({ path: '/ci-trust-rules/ctr-doesnotexist0000', body: rule(valid) }),
    ],
  };
}

/**
 * The exchange of a CI identity token (signed by the loopback issuer, fresh for each request) for a
 * pipeline token: it writes nothing, so every refusal trivially changes nothing; what is checked is that
 * each wrong field is a 422 at it, and that tokens no rule accepts or that do not verify are refused.
 */
async function addExchangeSpec(SPECS: Record<string, WriteSpec>, f: Fixtures, issuer: TestIssuer): Promise<void> {
  const { admin, h, workspace, wsMain } = f;
  const audience = 'https://prop.example.test';
  const claims = { repository: 'octo/prop', ref: 'refs/heads/main', sub: 'repo:octo/prop:ref:refs/heads/main' };
  const wsExchange = await workspace('ws-ci-exchange');
  const created = await api(h, 'post', `/workspaces/${wsExchange}/ci-trust-rules`, admin, {
    data: { type: 'ci-trust-rules', attributes: { issuer: issuer.url, audience, claims: { repository: 'octo/prop' } } },
  });
  if (created.status !== 201) throw new Error(`create the exchange's trust rule: ${describeResponse(created)}`);
  const exchange = (idToken: string, workspaceId = wsExchange) => ({
    path: '/ci-token-exchanges',
    body: { data: { type: 'ci-token-exchanges', attributes: { 'id-token': idToken, 'workspace-id': workspaceId } } },
  });
  const signed = (extra: Record<string, unknown> = {}, options: { expiresIn?: number } = {}) =>
    issuer.sign({ ...claims, aud: audience, ...extra }, options);
  SPECS['POST /ci-token-exchanges'] = {
    attributes: '/data/attributes',
    fields: resourceFields('ci-token-exchanges', {
      'id-token': str('text', 16_384, { nonEmpty: true }),
      'workspace-id': str('id', 64, { nonEmpty: true }),
    }),
    required: ['/data', '/data/type', '/data/attributes', '/data/attributes/id-token'],
    success: 201,
    base: async () => exchange(await signed()),
    fresh: async () => exchange(await signed()),
    failures: [
      async () => exchange(await signed({ repository: 'octo/other' })),
      async () => exchange(await signed(), wsMain),
      async () => exchange(await signed({}, { expiresIn: Math.floor(Date.now() / 1000) - 120 })),
      // Shaped as a JWT, signed by nobody.
      async () => exchange('bm90.YS1qd3Q.c2ln'),
    ],
  };
}
