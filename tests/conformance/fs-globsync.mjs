// Preload for the MCP conformance suite on Node 20: it imports `globSync` from
// 'fs', which Node added in 22. Node 20 fixes the names a built-in module exports
// when it first loads it, so setting fs.globSync afterwards is not enough; instead a
// resolve hook hands the suite a stand-in 'fs' that exports everything 'node:fs'
// does plus globSync from the `glob` npm package (installed beside the suite).
// Used as `node --import ./fs-globsync.mjs ...`; does nothing on a Node that has it.
import * as fs from 'node:fs';
import { register } from 'node:module';

if (typeof fs.globSync !== 'function') {
  register('./fs-globsync-hooks.mjs', import.meta.url);
}
