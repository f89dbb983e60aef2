/** The parameters the matrix fills, and the organizations it fills them from. */

export const ORG_A = 'isolation-alpha';
export const ORG_B = 'isolation-bravo';

/** Every path (and body) parameter the matrix can fill: a real value in A, and a value nothing has. */
export const MISSING = {
  organization_name: 'no-such-name',
  workspace_name: 'no-such-name',
  workspace_id: 'ws-doesnotexist00000',
  team_id: 'team-doesnotexist000',
  id: 'tws-doesnotexist0000',
  run_id: 'run-doesnotexist0000',
  plan_id: 'plan-doesnotexist000',
  apply_id: 'apply-doesnotexist00',
  task_id: 'task-doesnotexist000',
  workspace_task_id: 'wstask-doesnotexist0',
  task_stage_id: 'ts-doesnotexist00000',
  task_result_id: 'taskrs-doesnotexist0',
  outcome_id: 'taskrso-doesnotexist',
  configuration_version_id: 'cv-doesnotexist0000',
  token_id: 'at-doesnotexist00000',
  comment_id: 'wsc-doesnotexist0000',
  run_event_id: 're-doesnotexist00000',
  tag_id: 'tag-doesnotexist0000',
  configuration_id: 'nc-doesnotexist00000',
  user_id: 'user-doesnotexist00000',
  organization_membership_id: 'ou-doesnotexist000000',
  rule_id: 'ctr-doesnotexist0000',
  // The shape of a real upload token (rtup_ and 43 base64url characters) that no version has.
  upload_token: `rtup_${'doesnotexist'.padEnd(43, '0')}`,
} as const;
export type ParamName = keyof typeof MISSING;
export type Values = Record<ParamName, string>;
export const KNOWN_PARAMS = Object.keys(MISSING) as ParamName[];
export const isKnownParam = (name: string): name is ParamName => (KNOWN_PARAMS as string[]).includes(name);
