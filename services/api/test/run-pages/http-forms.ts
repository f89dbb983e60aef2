/** Form posts, cookies and CSRF tokens as a browser handles them. */

export const FORM = 'application/x-www-form-urlencoded';

export interface Browser {
  cookie: string;
  csrf: string;
}

export const cookieOf = (response: Response, name: string): string | undefined =>
  response.headers
    .getSetCookie()
    .find((line) => line.startsWith(`${name}=`))
    ?.split(';')[0];

export const csrfIn = (page: string): string => /name="csrf" value="([0-9a-f]{128})"/.exec(page)?.[1] ?? '';
