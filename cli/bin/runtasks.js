#!/usr/bin/env node
// The `runtasks` bin: plain JavaScript, so that an older Node, which cannot strip TypeScript's types,
// says what it lacks in one line instead of failing on the first type annotation with a stack trace.
const [major] = process.versions.node.split('.').map(Number);
if (major < 24) {
  process.stderr.write(`runtasks: needs Node 24 or later; this is Node ${process.versions.node}\n`);
  process.exit(2);
}
await import('../src/main.ts');
