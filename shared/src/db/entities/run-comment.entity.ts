import { defineEntity, p } from '@mikro-orm/core';
import { Run } from './run.entity.ts';

/**
 * A comment on a run (HCP's `comments`): written through the comments API, or the comment given to a
 * run action or a task stage override. `createdBy` is the user id of whoever wrote it (as the run's
 * own `created_by`: no foreign key, it names a token's owner).
 */
const RunCommentSchema = defineEntity({
  name: 'RunComment',
  tableName: 'run_comments',
  indexes: [{ name: 'run_comments_run_idx', properties: ['run', 'createdAt'] }],
  properties: {
    id: p.string().length(32).primary(),
    run: () => p.manyToOne(Run).deleteRule('cascade'),
    body: p.text(),
    createdBy: p.text().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});

export class RunComment extends RunCommentSchema.class {}
RunCommentSchema.setClass(RunComment);
