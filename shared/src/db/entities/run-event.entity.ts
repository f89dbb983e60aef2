import { defineEntity, p } from '@mikro-orm/core';
import { RunComment } from './run-comment.entity.ts';
import { Run } from './run.entity.ts';

/**
 * Who did what to a run, and when (HCP's run events): written by the run engine in the transaction of
 * the action itself, never apart from it, and never changed after. `actorId` is the user id of the
 * principal that acted (as `runs.created_by`: no foreign key, it names a token's owner today and a
 * person later). A comment given with the action is a run comment, linked here. `taskStageId` names
 * the stage an override was for (history: no foreign key; a stage goes only with its run).
 */
const RunEventSchema = defineEntity({
  name: 'RunEvent',
  tableName: 'run_events',
  indexes: [
    { name: 'run_events_run_idx', properties: ['run', 'createdAt'] },
    // A comment's deletion finds its events by it; partial, as almost no event has one (Migration20261202000000RunEventCommentIndex).
    {
      name: 'run_events_comment_idx',
      expression: `create index "run_events_comment_idx" on "run_events" ("comment_id") where "comment_id" is not null`,
    },
  ],
  properties: {
    id: p.string().length(32).primary(),
    run: () => p.manyToOne(Run).deleteRule('cascade'),
    action: p.text(),
    actorId: p.text().nullable(),
    comment: () => p.manyToOne(RunComment).nullable().deleteRule('set null'),
    taskStageId: p.string().length(32).nullable(),
    description: p.text().nullable(),
    createdAt: p.datetime(),
  },
});

export class RunEvent extends RunEventSchema.class {}
RunEventSchema.setClass(RunEvent);
