/** `free` allows one run task on at most ten workspaces; `standard` is unlimited (docs/design.md, "Editions"). */
export const EDITIONS = ['free', 'standard'] as const;
export type Edition = (typeof EDITIONS)[number];

export const FREE_RUN_TASK_LIMIT = 1;
export const FREE_RUN_TASK_WORKSPACE_LIMIT = 10;
