import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A resource change of a plan document, as `terraform show -json` writes one. */
function change(address: string, actions: string[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  const [type = '', name = ''] = address.replace(/^data\./, '').split('.');
  return {
    address,
    mode: address.startsWith('data.') ? 'data' : 'managed',
    type,
    name,
    provider_name: 'registry.terraform.io/hashicorp/aws',
    change: { actions, before: actions.includes('create') && !actions.includes('delete') ? null : {}, after: {}, ...extra },
  };
}

/**
 * A realistic plan: one instance created, a bucket updated, a role destroyed, a database replaced, a VPC
 * imported unchanged, and a data source read. HCP counts 2 additions, 1 change, 2 destructions, 1 import.
 */
export const CHANGING_PLAN = {
  format_version: '1.2',
  terraform_version: '1.9.5',
  planned_values: { root_module: {} },
  resource_changes: [
    change('aws_instance.web', ['create']),
    change('aws_s3_bucket.logs', ['update']),
    change('aws_iam_role.legacy', ['delete']),
    change('aws_db_instance.main', ['delete', 'create'], { replace_paths: [['engine_version']] }),
    change('aws_vpc.main', ['no-op'], { importing: { id: 'vpc-0a1b2c3d' } }),
    change('data.aws_ami.ubuntu', ['read']),
  ],
  output_changes: { web_ip: { actions: ['create'], before: null, after_unknown: true } },
  configuration: { root_module: {} },
};

export const CHANGING_PLAN_COUNTS = {
  'resource-additions': 2,
  'resource-changes': 1,
  'resource-destructions': 2,
  'resource-imports': 1,
};

/** A plan whose configuration matches the infrastructure: nothing to do. */
export const NO_CHANGE_PLAN = {
  format_version: '1.2',
  terraform_version: '1.9.5',
  planned_values: { root_module: {} },
  resource_changes: [change('aws_instance.web', ['no-op']), change('data.aws_ami.ubuntu', ['read'])],
  configuration: { root_module: {} },
};

/** A plan-reading task server's record of one run task request. */
export interface PlanRead {
  stage: string;
  runId: string;
  /** The plan JSON it read at plan_json_api_url (null where the payload had none). */
  plan: unknown;
  planStatus: number | null;
}

/**
 * A task server that acknowledges, reads the run's plan at `plan_json_api_url` with its access token
 * (as a scanner or cost estimator does), records it, then calls back `passed` (or `failed` for a run
 * whose message says so).
 */
export async function startPlanReader(): Promise<{ url: string; reads: PlanRead[]; server: Server }> {
  const reads: PlanRead[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      res.writeHead(200).end();
      const payload = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, string | null>;
      if (payload['access_token'] === 'test-token') return;
      void (async () => {
        const headers = { Authorization: `Bearer ${payload['access_token']}` };
        const planUrl = payload['plan_json_api_url'];
        const planRes = planUrl ? await fetch(planUrl, { headers }) : undefined;
        reads.push({
          stage: String(payload['stage']),
          runId: String(payload['run_id']),
          plan: planRes ? await planRes.json() : null,
          planStatus: planRes?.status ?? null,
        });
        await fetch(String(payload['task_result_callback_url']), {
          method: 'PATCH',
          headers: { ...headers, 'Content-Type': 'application/vnd.api+json' },
          body: JSON.stringify({ data: { type: 'task-results', attributes: { status: 'passed', message: 'plan read' } } }),
        });
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, reads, server };
}
