import { ApiError } from '@runtasks/shared/errors';

const TITLES: Record<number, string> = {
  400: 'bad request',
  403: 'forbidden',
  404: 'not found',
  409: 'conflict',
  413: 'payload too large',
  415: 'unsupported media type',
  422: 'invalid request',
};

/** An error the pages show as a page (the API's own errors are shown the same way). */
export const pageError = (status: number, detail: string): ApiError => new ApiError(status, TITLES[status] ?? 'error', detail);
