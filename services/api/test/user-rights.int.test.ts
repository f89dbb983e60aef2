import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { OrganizationMembership, Organization, Team, User } from '@runtasks/shared/db';
import { expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { api, createTeam, eventually, grantWorkspace, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { issueToken } from '../src/auth/tokens.ts';
import { addMembership, addToTeams, createUser, removeMembership, userEmails } from '../src/services/users.service.ts';

/**
 * A user token reaches the organizations its user is an (accepted) member of, with the union of the rights of the
 * user's teams there (the owners team makes an owner), and nothing once the membership is removed.
 * With the defaults a user has (the principal cache on): every change is seen at once.
 */
describe("a user's rights: the union of their teams'", () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;

  beforeAll(async () => {
    h = await startHarness({ ops: true });
    acme = await seedOrganization(h, uniqueName('rights'));
    other = await seedOrganization(h, uniqueName('rights-other'));
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A new user, member of `fixture`'s organization on these teams (their invitation accepted), and a token of theirs. */
  async function member(fixture: Fixture, teamIds: string[]) {
    const em = h.orm.em.fork();
    const user = await createUser(em, { email: `${uniqueName('person')}@Example.test` });
    const organization = await em.findOneOrFail(Organization, { name: fixture.organization });
    const membership = await addMembership(em, organization.id, user, 'active');
    await em.flush();
    await addToTeams(em, membership, await em.find(Team, { id: { $in: teamIds } }));
    await em.flush();
    const { secret } = await issueToken(em, h.secrets, { kind: 'user', userId: user.id });
    return { user, membership, token: secret };
  }
  const ownersTeamOf = async (fixture: Fixture) =>
    (await h.orm.em.fork().findOneOrFail(Team, { organization: { name: fixture.organization }, isOwners: true })).id;
  const workspace = (token: string, fixture = acme) => api(h, 'get', `/workspaces/${fixture.workspaceId}`, token);

  it('shows a member without teams the organization, and none of its workspaces or its teams', async () => {
    const { token } = await member(acme, []);
    const shown = await api(h, 'get', `/organizations/${acme.organization}`, token);
    expect(shown.status).toBe(200);
    expect(shown.body.data.attributes.permissions).toMatchObject({ 'can-traverse': true, 'can-update': false, 'can-create-team': false });
    expectNotFound(await workspace(token));
    expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/teams`, token));
    const listed = await api(h, 'get', '/organizations', token);
    expect(listed.body.data.map((organization: { id: string }) => organization.id)).toEqual([acme.organization]);
  });

  it('hides another organization behind the same 404 as a missing one', async () => {
    const { token } = await member(acme, [acme.teamId]);
    expectNotFound(await api(h, 'get', `/organizations/${other.organization}`, token));
    expectNotFound(await workspace(token, other));
    expectNotFound(await api(h, 'get', `/workspaces/ws-doesnotexist000000`, token));
  });

  it("holds the widest of its teams' access to a workspace, and their organization permissions together", async () => {
    const reader = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('readers'));
    const planner = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('planners'));
    const taskers = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('taskers'), { 'manage-run-tasks': true });
    await grantWorkspace(h, acme.organizationToken, reader, acme.workspaceId, { access: 'read' });
    await grantWorkspace(h, acme.organizationToken, planner, acme.workspaceId, { access: 'plan' });

    const readOnly = await member(acme, [reader]);
    const read = await workspace(readOnly.token);
    expect(read.status).toBe(200);
    expect(read.body.data.attributes.permissions).toMatchObject({ 'can-queue-run': false, 'can-update': false });

    const both = await member(acme, [reader, planner, taskers]);
    const union = await workspace(both.token);
    expect(union.body.data.attributes.permissions).toMatchObject({ 'can-queue-run': true, 'can-queue-apply': false, 'can-update': false });
    const organization = await api(h, 'get', `/organizations/${acme.organization}`, both.token);
    expect(organization.body.data.attributes.permissions).toMatchObject({ 'can-manage-run-tasks': true, 'can-create-workspace': false });
    expect((await api(h, 'get', `/organizations/${acme.organization}/tasks`, both.token)).status).toBe(200);
    expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/tasks`, readOnly.token));
  });

  it('makes a member of the owners team an owner', async () => {
    const owner = await member(acme, [await ownersTeamOf(acme)]);
    const created = await api(h, 'post', `/organizations/${acme.organization}/teams`, owner.token, {
      data: { type: 'teams', attributes: { name: uniqueName('by-owner') } },
    });
    expect(created.status).toBe(201);
    expect((await workspace(owner.token)).body.data.attributes.permissions).toMatchObject({ 'can-update': true, 'can-destroy': true });
    // Owner of one organization, nothing in another.
    expectNotFound(
      await api(h, 'post', `/organizations/${other.organization}/teams`, owner.token, {
        data: { type: 'teams', attributes: { name: 'x' } },
      }),
    );
  });

  it('reaches the organization no more once the membership is removed, though the token lives', async () => {
    const ownerTeam = await ownersTeamOf(acme);
    const removed = await member(acme, [ownerTeam]);
    // Remembered by the principal cache first.
    expect((await workspace(removed.token)).status).toBe(200);
    expect((await workspace(removed.token)).status).toBe(200);
    const em = h.orm.em.fork();
    await removeMembership(em, await em.findOneOrFail(OrganizationMembership, { id: removed.membership.id }, { populate: ['user'] }));
    // The principal cache hears of the removal through PostgreSQL's NOTIFY, a moment after the commit.
    expectNotFound(
      await eventually(async () => ((await workspace(removed.token)).status === 404 ? workspace(removed.token) : undefined), 5_000),
    );
    expectNotFound(await api(h, 'get', `/organizations/${acme.organization}`, removed.token));
    expect((await api(h, 'get', '/organizations', removed.token)).body.data).toEqual([]);
    expect(await h.orm.em.fork().count(Team, { id: ownerTeam })).toBe(1);
  });

  it('gives the email addresses of users by id, in lower case, leaving out ids of nobody', async () => {
    const { user } = await member(acme, []);
    const emails = await userEmails(h.orm.em.fork(), [user.id, 'user-nobody0000000000', user.id]);
    expect(emails).toEqual(new Map([[user.id, user.email]]));
    expect(user.email).toBe(user.email.toLowerCase());
    expect(await h.orm.em.fork().count(User, { email: user.email })).toBe(1);
  });
});
