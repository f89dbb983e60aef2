import type { MigrationObject } from '@mikro-orm/core';
import { Migration20261121000000Initial } from './Migration20261121000000Initial.ts';
import { Migration20261121010000Dispatch } from './Migration20261121010000Dispatch.ts';
import { Migration20261121020000ConfigurationVersions } from './Migration20261121020000ConfigurationVersions.ts';
import { Migration20261121030000RunTaskListIndex } from './Migration20261121030000RunTaskListIndex.ts';
import { Migration20261123000000RunTaskCount } from './Migration20261123000000RunTaskCount.ts';
import { Migration20261123100000StageOpenResults } from './Migration20261123100000StageOpenResults.ts';
import { Migration20261123110000HotUpdates } from './Migration20261123110000HotUpdates.ts';
import { Migration20261123220000DeadlineIndexPredicate } from './Migration20261123220000DeadlineIndexPredicate.ts';
import { Migration20261124000000PrincipalNotify } from './Migration20261124000000PrincipalNotify.ts';
import { Migration20261124100000RunsUnfinishedIndex } from './Migration20261124100000RunsUnfinishedIndex.ts';
import { Migration20261124120000HotTaskResults } from './Migration20261124120000HotTaskResults.ts';
import { Migration20261124180000ResultStageTaskUnique } from './Migration20261124180000ResultStageTaskUnique.ts';
import { Migration20261125000000StatusDomains } from './Migration20261125000000StatusDomains.ts';
import { Migration20261125120000StageCountReturning } from './Migration20261125120000StageCountReturning.ts';
import { Migration20261125170000RunStagesPlanned } from './Migration20261125170000RunStagesPlanned.ts';
import { Migration20261126100000LocalExecution } from './Migration20261126100000LocalExecution.ts';
import { Migration20261126200000OutcomeBytes } from './Migration20261126200000OutcomeBytes.ts';
import { Migration20261126300000TokenCreatedNotify } from './Migration20261126300000TokenCreatedNotify.ts';
import { Migration20261126400000PageSessions } from './Migration20261126400000PageSessions.ts';
import { Migration20261126500001OwnersTeams } from './Migration20261126500001OwnersTeams.ts';
import { Migration20261126900000WorkspaceSettings } from './Migration20261126900000WorkspaceSettings.ts';

/** Every migration, in order. A new migration file must be added here too (a test checks the folder). */
export const MIGRATIONS: MigrationObject[] = [
  { name: 'Migration20261121000000Initial', class: Migration20261121000000Initial },
  { name: 'Migration20261121010000Dispatch', class: Migration20261121010000Dispatch },
  { name: 'Migration20261121020000ConfigurationVersions', class: Migration20261121020000ConfigurationVersions },
  { name: 'Migration20261121030000RunTaskListIndex', class: Migration20261121030000RunTaskListIndex },
  { name: 'Migration20261123000000RunTaskCount', class: Migration20261123000000RunTaskCount },
  { name: 'Migration20261123100000StageOpenResults', class: Migration20261123100000StageOpenResults },
  { name: 'Migration20261123110000HotUpdates', class: Migration20261123110000HotUpdates },
  { name: 'Migration20261123220000DeadlineIndexPredicate', class: Migration20261123220000DeadlineIndexPredicate },
  { name: 'Migration20261124000000PrincipalNotify', class: Migration20261124000000PrincipalNotify },
  { name: 'Migration20261124100000RunsUnfinishedIndex', class: Migration20261124100000RunsUnfinishedIndex },
  { name: 'Migration20261124120000HotTaskResults', class: Migration20261124120000HotTaskResults },
  { name: 'Migration20261124180000ResultStageTaskUnique', class: Migration20261124180000ResultStageTaskUnique },
  { name: 'Migration20261125000000StatusDomains', class: Migration20261125000000StatusDomains },
  { name: 'Migration20261125120000StageCountReturning', class: Migration20261125120000StageCountReturning },
  { name: 'Migration20261125170000RunStagesPlanned', class: Migration20261125170000RunStagesPlanned },
  { name: 'Migration20261126100000LocalExecution', class: Migration20261126100000LocalExecution },
  { name: 'Migration20261126200000OutcomeBytes', class: Migration20261126200000OutcomeBytes },
  { name: 'Migration20261126300000TokenCreatedNotify', class: Migration20261126300000TokenCreatedNotify },
  { name: 'Migration20261126400000PageSessions', class: Migration20261126400000PageSessions },
  { name: 'Migration20261126500001OwnersTeams', class: Migration20261126500001OwnersTeams },
  { name: 'Migration20261126900000WorkspaceSettings', class: Migration20261126900000WorkspaceSettings },
];
