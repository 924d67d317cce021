// The consumer check (`npm run consumer-check`, run by .ci/run after the tests): packs the
// package as npm would publish it and installs the tarball with the README's install line into a
// fresh temporary project in which `make`, `cc`, `gcc`, `c++`, `g++` and `node-gyp` fail if run
// (failing stubs first on PATH): nothing may compile but better-sqlite3, which is installed first,
// with the compiler, where its prebuilt binary cannot be downloaded. npm must list no install
// script that the README's `allowScripts` snippet does not name. Then
//   (a) runs the README's first program with plain node (a SQLite session is created, a turn with
//       a user message is appended, the session is reopened, its derived messages are printed) and
//       checks it prints what the README says; imports every `exports` subpath;
//   (b) type-checks a TypeScript consumer (nodenext, strict, skipLibCheck false, no @types/node)
//       that imports the root and several subpaths, and the README's program as TypeScript:
//       0 errors expected;
//   (c) runs the installed `session-log --help` and reports how long it took (reported only:
//       no check here depends on the machine's speed);
//   (d) runs the package through require() (Node >= 20.19) and two processes appending turns to
//       one JSONL session at once, whose log then verifies and holds every acknowledged turn.
// The temporary project is removed afterwards (KEEP_CONSUMER=1 keeps it for inspection).
import { execFile, execFileSync, spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")

// The environment of `npm run` describes this repository: do not hand it to the nested npm.
const env = Object.fromEntries(
  Object.entries(process.env).filter(([key]) =>
    !/^npm_(package_|lifecycle_|command$|config_local_prefix$|config_loglevel$)/i.test(key) && key !== "INIT_CWD"
  )
)

/** A one-event-free session file to import: the header of the session the JSONL writers share. */
const writeSeed = (dir) => {
  const file = join(dir, "shared-seed.jsonl")
  writeFileSync(file, JSON.stringify({ type: "session", version: 1, id: "shared", createdAt: 0 }) + "\n" +
    JSON.stringify({ type: "turn/start", seq: 0, time: 0, data: { turn: 1 } }) + "\n" +
    JSON.stringify({ type: "turn/end", seq: 1, time: 0, data: { turn: 1, reason: { kind: "completed" } } }) + "\n")
  return file
}

/** Runs a command without blocking; resolves with its stdout, rejects on a non-zero exit. */
const runAsync = (command, args, cwd, environment) =>
  new Promise((resolve, reject) => {
    execFile(command, args, { cwd, env: environment, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${[command, ...args].join(" ")}: ${error.message}\n${stdout}${stderr}`)) : resolve(stdout))
  })

const log = (line) => process.stdout.write(`consumer-check: ${line}\n`)
const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`

const fail = (message) => {
  throw new Error(message)
}

/** Runs a command; returns its stdout and the time it took. Fails with its output on a non-zero exit. */
const run = (command, args, cwd, environment = env) => {
  const started = performance.now()
  const result = spawnSync(command, args, { cwd, env: environment, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
  const ms = performance.now() - started
  if (result.status !== 0) {
    fail(`${[command, ...args].join(" ")} exited with ${result.status ?? result.signal}\n${result.stdout}${result.stderr}`)
  }
  return { stdout: result.stdout, stderr: result.stderr, ms }
}

// The README's install line, its first program and what that program prints (kept true here).
const readme = readFileSync(join(root, "README.md"), "utf8")
const installLine = readme.match(/^npm install effect-session-log .*$/m)?.[0] ?? fail("README: no install line")
const afterInstall = readme.slice(readme.indexOf(installLine))
const program = afterInstall.match(/```js\n([\s\S]*?)```/)?.[1] ?? fail("README: no program after the install line")
const printed = afterInstall.match(/```text\n([\s\S]*?)```/)?.[1].trim() ?? fail("README: no output after the program")
const installArgs = installLine.split(/\s+/).slice(2)
const allowScripts = JSON.parse(readme.match(/```json\n(\{\s*"allowScripts"[\s\S]*?)```/)?.[1] ?? fail("README: no allowScripts snippet")).allowScripts
const COMPILERS = ["make", "cc", "gcc", "c++", "g++", "node-gyp"]
const unlisted = Object.entries(pkg.peerDependencies).filter(([name, range]) => !installArgs.includes(`${name}@${range}`))
if (unlisted.length > 0) fail(`README's install line lacks ${unlisted.map(([name, range]) => `${name}@${range}`).join(" ")}`)

const importEverySubpath = `import { readFileSync } from "node:fs"

const { exports } = JSON.parse(readFileSync("./node_modules/effect-session-log/package.json", "utf8"))
let imported = 0
for (const subpath of Object.keys(exports)) {
  if (subpath === "./package.json") continue
  await import("effect-session-log" + subpath.slice(1))
  imported++
}
console.log(imported)
`

const consumerTs = `import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect, Layer } from "effect"
import * as Api from "effect-session-log"
import type { AgentError, TurnResult } from "effect-session-log/AgentLoop"
import * as Compact from "effect-session-log/Compact"
import * as Errors from "effect-session-log/Errors"
import * as JsonlStore from "effect-session-log/JsonlStore"
import * as MemoryStore from "effect-session-log/MemoryStore"
import type { Message } from "effect-session-log/Messages"
import * as Session from "effect-session-log/Session"
import * as SessionLive from "effect-session-log/SessionLive"
import * as SessionStore from "effect-session-log/SessionStore"
import * as SqliteStore from "effect-session-log/SqliteStore"

const firstTurn: Effect.Effect<ReadonlyArray<Message>, Session.AppendError, Session.Session> = Effect.gen(function*() {
  const session = yield* Session.Session
  yield* session.append("turn/start", { turn: 1 })
  yield* session.append("user/message", {
    id: "u1",
    role: "user",
    content: [{ type: "text", text: "Hello" }],
    source: { kind: "user" }
  }, { surfaceOp: "append" })
  return yield* session.messages
})

// opening a SQLite file: a foreign database (StoreSchemaMismatch), a malformed one (StoreCorrupt L7), I/O
const sqlite: Layer.Layer<SessionStore.SessionStore, Errors.StoreSchemaMismatch | Errors.StoreCorrupt | Errors.StoreFailure> =
  SqliteStore.layer({ filename: "./typed.db" })
const jsonl: Layer.Layer<SessionStore.SessionStore> = JsonlStore.layer({ root: "./sessions" }).pipe(
  Layer.provide(FileSystem.layerNoop({})),
  Layer.provide(Path.layer)
)
const memory: Layer.Layer<SessionStore.SessionStore> = MemoryStore.layer()

export const onSqlite: Effect.Effect<
  ReadonlyArray<Message>,
  Session.AppendError | SessionLive.CreateError | Errors.StoreSchemaMismatch
> = firstTurn.pipe(Effect.provide(SessionLive.layerCreate({ id: "typed" })), Effect.provide(sqlite))
export const onJsonl = firstTurn.pipe(Effect.provide(SessionLive.layerOpen("typed")), Effect.provide(jsonl))
export const onMemory = firstTurn.pipe(Effect.provide(SessionLive.layerCreate()), Effect.provide(memory))

// The root's namespaces are the subpath modules.
export const sameTag: typeof Session.Session = Api.Session.Session
export const compacted: Effect.Effect<Compact.CompactionResult, Compact.CompactError, Session.Session | Api.Summarizer.Summarizer> =
  Compact.compact({ mode: "manual" })
export type Turn = TurnResult | AgentError
`

const tsconfig = {
  compilerOptions: {
    target: "ES2022",
    module: "nodenext",
    moduleResolution: "nodenext",
    strict: true,
    skipLibCheck: false,
    noEmit: true,
    types: []
  },
  files: ["consumer.ts", "hello.ts"]
}

// (d) require() from CommonJS
const requireForm = `const Effect = require("effect/Effect")
const { MemoryStore, Session, SessionLive } = require("effect-session-log")
const { layerMemoryStore } = require("effect-session-log/MemoryStore")
if (layerMemoryStore !== MemoryStore.layer) throw new Error("two copies of MemoryStore")
const turn = Effect.gen(function*() {
  const session = yield* Session.Session
  yield* session.append("turn/start", { turn: 1 })
  yield* session.append("user/message", { id: "u1", role: "user", content: [{ type: "text", text: "Hi" }], source: { kind: "user" } }, { surfaceOp: "append" })
  return yield* session.messages
})
turn.pipe(Effect.provide(SessionLive.layerCreate({ id: "r" })), Effect.provide(layerMemoryStore()), Effect.runPromise)
  .then((messages) => console.log(messages.length))
`

// (d) one of two processes appending turns to one JSONL session: prints "ack <id>" per landed turn
const jsonlWriter = `import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { JsonlStore, Session, SessionLive } from "effect-session-log"

const [root, tag, count] = process.argv.slice(2)
const store = JsonlStore.layer({ root }).pipe(Layer.provide(NodeContext.layer))
const turn = (id) => Effect.gen(function*() {
  const session = yield* Session.Session
  const n = (yield* session.events).filter((e) => e.type === "turn/start").length + 1
  yield* session.append("turn/start", { turn: n })
  yield* session.append("user/message", { id, role: "user", content: [{ type: "text", text: id }], source: { kind: "user" } }, { surfaceOp: "append" })
  yield* session.append("turn/end", { turn: n, reason: { kind: "completed" } })
}).pipe(Effect.provide(SessionLive.layerOpen("shared")), Effect.provide(store))
for (let i = 0; i < Number(count); i++) {
  for (let attempt = 0; ; attempt++) {
    const id = tag + "-" + i + "-" + attempt
    const result = await Effect.runPromise(Effect.either(turn(id)))
    if (result._tag === "Right") { console.log("ack " + id); break }
    if (result.left._tag !== "AppendConflict") throw new Error(String(result.left))
  }
}
`

const work = mkdtempSync(join(tmpdir(), "esl-consumer-"))
try {
  // pack: prepack builds the library and the CLI bundle
  const packed = run("npm", ["pack", "--pack-destination", work], root)
  const tarball = readdirSync(work).find((name) => name.endsWith(".tgz")) ?? fail("npm pack wrote no tarball")
  const files = execFileSync("tar", ["-tzf", join(work, tarball)], { encoding: "utf8" }).split("\n").filter(Boolean)
    .map((name) => name.replace(/^package\//, ""))
  const required = ["package.json", "README.md", "LICENSE", "bin/session-log.js", "dist/cli/session-log.mjs"]
  for (const target of Object.values(pkg.exports)) {
    if (typeof target === "string") required.push(target.replace(/^\.\//, ""))
    else required.push(target.types.replace(/^\.\//, ""), target.import.replace(/^\.\//, ""))
  }
  const missing = required.filter((name) => !files.includes(name))
  if (missing.length > 0) fail(`the tarball lacks ${missing.join(", ")}`)
  const unwanted = files.filter((name) =>
    /^(test|bench|scripts|\.ci|node_modules)\//.test(name) || (name.startsWith("dist/") && name.endsWith(".mjs") && !name.startsWith("dist/cli/"))
  )
  if (unwanted.length > 0) fail(`the tarball ships ${unwanted.join(", ")}`)
  // every source and declaration map points at a file that ships
  execFileSync("tar", ["-xzf", join(work, tarball), "-C", work])
  let maps = 0
  for (const name of files.filter((f) => f.endsWith(".map"))) {
    const { sources } = JSON.parse(readFileSync(join(work, "package", name), "utf8"))
    for (const source of sources) {
      const target = join(work, "package", dirname(name), source)
      if (!files.includes(target.slice(join(work, "package").length + 1))) fail(`${name} points at ${source}, which does not ship`)
    }
    maps++
  }
  rmSync(join(work, "package"), { recursive: true, force: true })
  log(`every one of ${maps} source and declaration maps points at a shipped source`)
  log(`packed ${tarball}: ${files.length} files (${seconds(packed.ms)} with the build)`)

  // a project where every compiler fails if run
  const stubs = join(work, "stubs")
  mkdirSync(stubs)
  for (const name of COMPILERS) {
    writeFileSync(
      join(stubs, name),
      `#!/bin/sh\necho "${name} $*" >> "${join(work, "compiler-calls.log")}"\necho "consumer-check: ${name} was run: nothing may compile" >&2\nexit 1\n`,
      { mode: 0o755 }
    )
  }
  const stubbed = { ...env, PATH: `${stubs}:${env.PATH}`, npm_config_node_gyp: join(stubs, "node-gyp") }
  const app = join(work, "app")
  mkdirSync(app)
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "esl-consumer", private: true, type: "module", allowScripts }, null, 2))
  // better-sqlite3 alone may build natively: first, with the compiler (no prebuilt binary can be
  // downloaded here)
  const sqlite = run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", `better-sqlite3@${pkg.dependencies["better-sqlite3"]}`], app)
  log(`installed better-sqlite3 first, with the compiler (${seconds(sqlite.ms)})`)
  // then the README's line, the tarball in place of the registry name, with the failing compilers
  const installed = run("npm", [
    "install",
    "--no-audit",
    "--no-fund",
    "--prefer-offline",
    ...installArgs.map((arg) => arg === "effect-session-log" ? join(work, tarball) : arg)
  ], app, stubbed)
  // a failed build of an optional dependency does not fail the install: the stubs say whether any ran
  const calls = join(work, "compiler-calls.log")
  if (existsSync(calls)) fail(`the install ran a compiler:\n${readFileSync(calls, "utf8")}`)
  const uncovered = `${installed.stdout}${installed.stderr}`.split("\n").filter((line) => /install-scripts\s+\S+@\S+ \(/.test(line))
  if (uncovered.length > 0) fail(`npm lists install scripts the README's allowScripts does not name:\n${uncovered.join("\n")}`)
  log(`installed the tarball with README's line and failing compilers on PATH: ${installLine} (${seconds(installed.ms)})`)

  // (a) plain node: the README's program, then every subpath
  writeFileSync(join(app, "hello.mjs"), program)
  const output = run(process.execPath, ["hello.mjs"], app).stdout.trim()
  if (output !== printed) fail(`hello.mjs printed\n${output}\ninstead of README's\n${printed}`)
  log(`(a) node hello.mjs (README's program: create a SQLite session, append a turn, reopen) printed ${output}`)
  writeFileSync(join(app, "subpaths.mjs"), importEverySubpath)
  const imported = Number(run(process.execPath, ["subpaths.mjs"], app).stdout.trim())
  const subpaths = Object.keys(pkg.exports).filter((key) => key !== "./package.json").length
  if (imported !== subpaths) fail(`imported ${imported} subpaths, expected ${subpaths}`)
  log(`(a) node: all ${subpaths} exports subpaths import`)

  // (b) TypeScript consumer
  writeFileSync(join(app, "consumer.ts"), consumerTs)
  writeFileSync(join(app, "hello.ts"), program)
  writeFileSync(join(app, "tsconfig.json"), JSON.stringify(tsconfig, null, 2))
  const typed = spawnSync(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: app, env, encoding: "utf8" })
  const errors = (typed.stdout.match(/error TS\d+/g) ?? []).length
  if (typed.status !== 0) fail(`tsc --noEmit of the TypeScript consumer: ${errors} error(s)\n${typed.stdout}${typed.stderr}`)
  log(`(b) tsc --noEmit (nodenext, strict, skipLibCheck false): 0 errors`)

  // (c) the installed bin
  const bin = join(app, "node_modules", ".bin", "session-log")
  const times = []
  for (let i = 0; i < 3; i++) {
    const help = run(bin, ["--help"], app)
    if (!help.stdout.includes("session-log")) fail(`session-log --help printed:\n${help.stdout}${help.stderr}`)
    times.push(help.ms)
  }
  log(`(c) installed session-log --help answered in ${times.map(seconds).join(", ")} (first run, then warm)`)

  // (d) require(), and two processes appending to one JSONL session
  writeFileSync(join(app, "required.cjs"), requireForm)
  const requiredOut = run(process.execPath, ["required.cjs"], app, stubbed).stdout.trim()
  if (requiredOut !== "1") fail(`required.cjs printed ${requiredOut}`)
  log(`(d) require("effect-session-log") from CommonJS ran a memory session (Node ${process.version})`)
  writeFileSync(join(app, "writer.mjs"), jsonlWriter)
  const sessions = join(app, "sessions")
  run(bin, ["import", "--store", `jsonl:${sessions}`, "--json", writeSeed(app)], app, stubbed)
  const writers = await Promise.all(["a", "b"].map((tag) => runAsync(process.execPath, ["writer.mjs", sessions, tag, "15"], app, stubbed)))
  const acked = writers.flatMap((out) => out.split("\n").filter((l) => l.startsWith("ack ")).map((l) => l.slice(4)))
  const verified = JSON.parse(run(bin, ["verify", "--json", join(sessions, "shared.jsonl")], app, stubbed).stdout)
  if (verified.ok !== true) fail(`the shared JSONL session does not verify: ${JSON.stringify(verified)}`)
  const messages = JSON.parse(run(bin, ["messages", "--json", join(sessions, "shared.jsonl")], app, stubbed).stdout)
  const ids = new Set(messages.map((m) => m.id))
  const lost = acked.filter((id) => !ids.has(id))
  if (acked.length !== 30 || lost.length > 0) fail(`two JSONL writers: ${acked.length} of 30 turns acknowledged, lost ${lost.join(", ")}`)
  log(`(d) two processes appended 30 turns to one JSONL session: it verifies (${verified.events} events) and holds every acknowledged turn`)
} finally {
  if (process.env.KEEP_CONSUMER === "1") log(`kept ${work}`)
  else rmSync(work, { recursive: true, force: true })
}
log("ok")
