// Resolve hook (see fs-globsync.mjs): 'fs' and 'node:fs' resolve to the stand-in,
// except from the stand-in itself, which needs the real module.
const SHIM = new URL('./fs-globsync-shim.mjs', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL !== SHIM) {
    return { url: SHIM, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
