import type { FilterQuery } from '@mikro-orm/core';
import { Organization, RunTask, Workspace } from '@runtasks/shared/db';
import { runTaskScope } from '../auth/run-task-scope.ts';
import { organizationScope, workspaceScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';
import { parsePage } from '../http/pagination.ts';
import { findOrganization } from '../services/organization.service.ts';
import { pagePath } from './access.ts';
import { dataTable, pager, untrusted, words } from './components.ts';
import { html, type SafeHtml } from './html.ts';
import { sendPage } from './layout.ts';
import type { PageSession } from './session.ts';

/** /app: the site admin's list of organizations; everyone else goes on to their own organization. */
export async function showHome(ctx: ApiContext, session: PageSession): Promise<void> {
  if (session.principal.kind !== 'admin' && session.organizationName) return ctx.redirect(pagePath(session.organizationName));
  const scope = organizationScope(session.principal) ?? { id: null };
  const organizations = await ctx.state.em.find(Organization, scope as FilterQuery<Organization>, { orderBy: { name: 'asc' }, limit: 500 });
  const items = organizations.map((organization) => html`<li><a href="${pagePath(organization.name)}">${organization.name}</a></li>`);
  sendPage(ctx, {
    title: 'Organizations',
    session,
    body: html`<h1>Organizations</h1>
      ${
        items.length > 0
          ? html`<ul class="plain">
              ${items}
            </ul>`
          : html`<p>No organizations yet.</p>`
      }`,
  });
}

function tasksSection(tasks: readonly RunTask[] | undefined): SafeHtml {
  if (!tasks) return html`<p class="hint">Run tasks are listed for those who may manage them.</p>`;
  if (tasks.length === 0) return html`<p>No run tasks yet.</p>`;
  const rows = tasks.map(
    (task) =>
      html`<tr>
        <th scope="row">${untrusted(task.name)}</th>
        <td class="nowrap">${task.enabled ? 'enabled' : 'disabled'}</td>
        <td>${untrusted(task.description ?? '')}</td>
        <td>
          ${task.globalEnabled ? `global: ${task.globalStages.map(words).join(', ')} (${task.globalEnforcementLevel})` : 'attached per workspace'}
        </td>
      </tr>`,
  );
  return dataTable({ headers: ['Task', 'State', 'Description', 'Where it runs'], rows });
}

/** /app/:org: the workspaces the principal may read, and the organization's run tasks where it may manage them. */
export async function showOrganization(ctx: ApiContext, session: PageSession): Promise<void> {
  const organization = await findOrganization(ctx);
  const page = parsePage(ctx.query);
  const scope = workspaceScope(ctx.state.principal, 'read') ?? { id: null };
  const [workspaces, total] = await ctx.state.em.findAndCount(
    Workspace,
    { $and: [scope, { organization: organization.id }] } as FilterQuery<Workspace>,
    { orderBy: { name: 'asc', id: 'asc' }, limit: page.size, offset: page.offset },
  );
  const taskScope = runTaskScope(ctx.state.principal);
  const tasks = taskScope
    ? await ctx.state.em.find(RunTask, { ...taskScope, organization: organization.id } as FilterQuery<RunTask>, {
        orderBy: { name: 'asc' },
        limit: 500,
      })
    : undefined;
  const items = workspaces.map(
    (workspace) =>
      html`<li>
        <a href="${pagePath(organization.name, 'workspaces', workspace.name)}">${workspace.name}</a>
        ${workspace.description ? html`<span class="hint">${workspace.description}</span>` : undefined}
      </li>`,
  );
  sendPage(ctx, {
    title: organization.name,
    session,
    crumbs: [{ label: organization.name }],
    body: html`<h1>${organization.name}</h1>
      <section aria-labelledby="workspaces-heading">
        <h2 id="workspaces-heading">Workspaces</h2>
        ${
          items.length > 0
            ? html`<ul class="plain">
                ${items}
              </ul>`
            : html`<p>No workspaces you may read.</p>`
        }
        ${pager(pagePath(organization.name), page, total, 'Workspaces')}
      </section>
      <section aria-labelledby="tasks-heading">
        <h2 id="tasks-heading">Run tasks</h2>
        ${tasksSection(tasks)}
      </section>`,
  });
}
