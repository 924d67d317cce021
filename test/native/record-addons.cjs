// Preload (`node --require`) for test/native/addons.test.ts: records every native module loaded
// (process.dlopen) in globalThis.__dlopened, blocking nothing.
globalThis.__dlopened = []
const dlopen = process.dlopen
process.dlopen = function(module, filename, ...rest) {
  globalThis.__dlopened.push(String(filename))
  return dlopen.call(this, module, filename, ...rest)
}
