import { PRINCIPALS_CHANNEL } from '../queue/names.ts';

/** The body of the triggers that tell API processes to forget the principals they remember. */
export const PRINCIPALS_NOTIFY = `perform pg_notify('${PRINCIPALS_CHANNEL}', ''); return null;`;
