/** An environment variable the lean reference's processes cannot start without (the harness sets them all). */
export function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}
