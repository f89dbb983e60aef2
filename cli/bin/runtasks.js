#!/usr/bin/env node
// The `runtasks` bin: plain JavaScript, so that an older Node, which cannot strip TypeScript's types,
// says what it lacks in one line instead of failing on the first type annotation with a stack trace.
// Node strips the types of the sources itself, except under node_modules (where `npx` installs this
// repository): there a load hook strips them with Node's own stripTypeScriptTypes.
import { readFileSync } from 'node:fs';

const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `runtasks: needs Node 22.18 or later; this is Node ${process.versions.node} (the one-file CLI your service serves at /cli/runtasks.mjs needs Node 22)\n`,
  );
  process.exit(2);
}
const sources = new URL('../src/', import.meta.url).href;
if (sources.includes('/node_modules/')) {
  const { registerHooks, stripTypeScriptTypes } = await import('node:module');
  // Both are experimental in Node 22 and 24: their one-time warning is not the CLI's to print.
  const warnings = process.listeners('warning');
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    if (warning.name !== 'ExperimentalWarning') for (const listener of warnings) listener(warning);
  });
  registerHooks({
    load(url, context, nextLoad) {
      if (!url.startsWith(sources) || !url.endsWith('.ts')) return nextLoad(url, context);
      return { format: 'module', source: stripTypeScriptTypes(readFileSync(new URL(url), 'utf8')), shortCircuit: true };
    },
  });
}
await import('../src/main.ts');
