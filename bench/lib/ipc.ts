/** The child side of Managed.call: answers each IPC message with the result of its command's handler. */
export function serveIpc(handlers: Record<string, (message: Record<string, unknown>) => Promise<unknown> | unknown>): void {
  process.on('message', (message: Record<string, unknown>) => {
    const id = message['id'];
    const handler = handlers[String(message['cmd'])];
    if (!handler) {
      process.send?.({ id, error: `unknown command ${String(message['cmd'])}` });
      return;
    }
    Promise.resolve()
      .then(() => handler(message))
      .then(
        (result) => process.send?.({ id, result }),
        (error: unknown) => process.send?.({ id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
      );
  });
  // The parent going away ends the child: nothing is left running.
  process.on('disconnect', () => process.exit(0));
}
