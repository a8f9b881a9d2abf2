// The stand-in 'fs' (see fs-globsync.mjs): node:fs, plus globSync from `glob`.
// These files are copied beside the suite's node_modules when it is installed.
import fs from 'node:fs';
import { globSync as glob } from 'glob';

export * from 'node:fs';
export default fs;

export function globSync(pattern, options) {
  return glob(pattern, options);
}
