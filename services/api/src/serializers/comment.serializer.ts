import { selfLink, timestamp, toOne, type Resource } from '../http/jsonapi.ts';
import type { CommentView } from '../services/run-comment.service.ts';

/** HCP's `comments` document: the body and when it was written; `run` names the run it is on. */
export function serializeComment(comment: CommentView): Resource {
  return {
    id: comment.id,
    type: 'comments',
    attributes: {
      body: comment.body,
      'created-at': timestamp(comment.createdAt),
    },
    relationships: {
      run: toOne('runs', comment.run.id),
    },
    links: selfLink(`/comments/${comment.id}`),
  };
}
