import { randomBytes } from 'node:crypto';

/** Resource id prefixes, HCP style, so clients and users recognise them. One place owns them. */
export const ID_PREFIX = {
  organization: 'org',
  workspace: 'ws',
  run: 'run',
  plan: 'plan',
  apply: 'apply',
  task: 'task',
  workspaceTask: 'wstask',
  taskStage: 'ts',
  taskResult: 'taskrs',
  taskResultOutcome: 'taskrso',
  team: 'team',
  teamWorkspace: 'tws',
  token: 'at',
  configurationVersion: 'cv',
  comment: 'wsc',
  runEvent: 're',
  tag: 'tag',
  notificationConfiguration: 'nc',
  notificationDelivery: 'ncd',
  user: 'user',
  organizationMembership: 'ou',
  ciTrustRule: 'ctr',
} as const;
export type IdKind = keyof typeof ID_PREFIX;

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** 16 random alphanumerics; rejection sampling keeps every character equally likely. */
export function randomAlphanumeric(length = 16): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

export function newId(kind: IdKind): string {
  return `${ID_PREFIX[kind]}-${randomAlphanumeric()}`;
}
