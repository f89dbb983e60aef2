import { Run, WorkspaceTask, type Workspace } from '@runtasks/shared/db';
import type { ApiContext } from '../context.ts';
import { parsePage } from '../http/pagination.ts';
import { findWorkspace } from '../services/workspace.service.ts';
import { mayOnWorkspace, pagePath } from './access.ts';
import { dataTable, pager, statusBadge, time, untrusted, words } from './components.ts';
import { runWords } from './status-words.ts';
import { html, type SafeHtml } from './html.ts';
import { sendPage } from './layout.ts';
import type { PageSession } from './session.ts';

/** The workspace named by the URL, as the API's by-name lookup finds it (same scope, same 404). */
export const workspaceOfPage = (ctx: ApiContext): Promise<Workspace> =>
  findWorkspace(ctx, 'runs:read', {
    name: ctx.params['workspace_name'] ?? '',
    organization: { name: ctx.params['organization_name'] ?? '' },
  });

async function attachedTasks(ctx: ApiContext, workspace: Workspace): Promise<SafeHtml> {
  // Listed where the API lists them: for those with the run-tasks permission on the workspace.
  if (!(await mayOnWorkspace(ctx, 'run-tasks', workspace.id)))
    return html`<p class="hint">Attached tasks are listed for those who may manage them.</p>`;
  const associations = await ctx.state.em.find(
    WorkspaceTask,
    { workspace: workspace.id },
    { populate: ['task'], orderBy: { createdAt: 'asc', id: 'asc' } },
  );
  if (associations.length === 0) return html`<p>No run tasks attached.</p>`;
  const rows = associations.map(
    (association) =>
      html`<tr>
        <th scope="row">${untrusted(association.task.name)}</th>
        <td>${association.stages.map(words).join(', ')}</td>
        <td class="nowrap">${association.enforcementLevel}</td>
      </tr>`,
  );
  return dataTable({ headers: ['Task', 'Stages', 'Enforcement'], rows });
}

/** /app/:org/workspaces/:ws: the workspace's runs, newest first and paginated, and its attached tasks. */
export async function showWorkspace(ctx: ApiContext, session: PageSession): Promise<void> {
  const workspace = await workspaceOfPage(ctx);
  const organizationName = workspace.organization.name;
  const page = parsePage(ctx.query);
  const [runs, total] = await ctx.state.em.findAndCount(
    Run,
    { workspace: workspace.id },
    { orderBy: { createdAt: 'desc', id: 'desc' }, limit: page.size, offset: page.offset },
  );
  const base = pagePath(organizationName, 'workspaces', workspace.name);
  const rows = runs.map(
    (run) =>
      html`<tr>
        <th scope="row"><a href="${`${base}/runs/${encodeURIComponent(run.id)}`}">${run.id}</a></th>
        <td class="nowrap">
          ${statusBadge(runWords(run))}${run.hasTaskWarnings ? html` <span class="badge tone-warn">Task warnings</span>` : undefined}
        </td>
        <td>${untrusted(run.message)}</td>
        <td class="nowrap">${time(run.createdAt)}</td>
      </tr>`,
  );
  sendPage(ctx, {
    title: workspace.name,
    session,
    crumbs: [{ label: organizationName, href: pagePath(organizationName) }, { label: workspace.name }],
    body: html`<h1>${workspace.name}</h1>
      ${workspace.description ? html`<p>${workspace.description}</p>` : undefined}
      <section aria-labelledby="runs-heading">
        <h2 id="runs-heading">Runs</h2>
        ${rows.length > 0 ? dataTable({ headers: ['Run', 'Status', 'Message', 'Created'], rows }) : html`<p>No runs yet.</p>`}
        ${pager(base, page, total, 'Runs')}
      </section>
      <section aria-labelledby="attached-heading">
        <h2 id="attached-heading">Attached run tasks</h2>
        ${await attachedTasks(ctx, workspace)}
      </section>`,
  });
}
