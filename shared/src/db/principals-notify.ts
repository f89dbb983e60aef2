import { PRINCIPALS_CHANNEL } from '../queue/names.ts';

/** The body of the triggers that tell API processes to forget the principals they remember. */
export const PRINCIPALS_NOTIFY = `perform pg_notify('${PRINCIPALS_CHANNEL}', ''); return null;`;

/** The payload of a token's creation: processes forget the tokens they refused (it may be one of them), nothing else. */
export const TOKEN_CREATED = 'token-created';

/** The body of the trigger that tells API processes a token was created. */
export const TOKEN_CREATED_NOTIFY = `perform pg_notify('${PRINCIPALS_CHANNEL}', '${TOKEN_CREATED}'); return null;`;
