// Preload (`node --require`) for test/native/addons.test.ts: makes the native addons unloadable
// as on a machine where they were never installed, and records every native module loaded.
// - CommonJS: `require("fs-native-extensions")` and `require("better-sqlite3")` fail as missing;
// - ESM: the same specifiers (and @effect/sql-sqlite-node, which imports better-sqlite3) fail to
//   resolve, through a module.register hook;
// - process.dlopen: every .node file loaded is appended to globalThis.__dlopened.
const Module = require("node:module")
const BLOCKED = ["fs-native-extensions", "better-sqlite3"]
const blocked = (request) => BLOCKED.some((name) => request === name || request.startsWith(name + "/"))

const resolveFilename = Module._resolveFilename
Module._resolveFilename = function(request, ...rest) {
  if (blocked(request)) {
    const error = new Error(`Cannot find module '${request}' (blocked by the test)`)
    error.code = "MODULE_NOT_FOUND"
    throw error
  }
  return resolveFilename.call(this, request, ...rest)
}

Module.register(
  "data:text/javascript," + encodeURIComponent(`
    const BLOCKED = ${JSON.stringify([...BLOCKED, "@effect/sql-sqlite-node"])}
    export async function resolve(specifier, context, next) {
      if (BLOCKED.some((name) => specifier === name || specifier.startsWith(name + "/"))) {
        const error = new Error("Cannot find package '" + specifier + "' (blocked by the test)")
        error.code = "ERR_MODULE_NOT_FOUND"
        throw error
      }
      return next(specifier, context)
    }
  `)
)

require("./record-addons.cjs")
