/**
 * Shared set-up of the viewer's tests: the demo session (test/view/fixtures/demo-session.jsonl,
 * written by `session-log demo`: three compactions, pruned tool results, streamed chunks) and a
 * session of hostile text, stored through a store's own `create` and `append`; the viewer's app
 * served on a free port of 127.0.0.1 over a store; the web app bundled by esbuild as the CLI's
 * build does.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import { join } from "node:path"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { makeApp, type ViewAssets } from "../../src/programs/view/Server.js"
import { BIN } from "../cli/helpers.js"

export const FIXTURES = join(__dirname, "fixtures")
export const DEMO_FILE = join(FIXTURES, "demo-session.jsonl")
export const TOKEN = "test-token-0123456789abcdef"

/** The header and events of a JSONL fixture. */
export const readFixture = (file: string) => {
  const lines = readFileSync(file, "utf8").split("\n").filter((l) => l !== "")
  const header = JSON.parse(lines[0]) as { id: string; createdAt: number; [k: string]: unknown }
  return { header, events: lines.slice(1).map((l) => JSON.parse(l) as Event) }
}

/** The demo session's header and events. */
export const demo = () => readFixture(DEMO_FILE)

/** Text no page may interpret: markup, a script, a javascript: link, controls, bidi overrides, a huge line. */
export const HOSTILE_TEXTS = [
  `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`,
  `[click](javascript:window.__pwned=3) <a href="javascript:window.__pwned=4">link</a>`,
  "control \u0000\u0007\u001b[31m characters and a right-to-left \u202Eoverride\u202C",
  "x".repeat(200_000)
]

/** A session whose user messages are the hostile texts. */
export const hostileSession = (id = "hostile") => ({
  header: { type: "session", version: 1, id, createdAt: 1_000 },
  events: HOSTILE_TEXTS.map((text, seq): Event => ({
    type: "user/message",
    seq,
    time: 1_000 + seq,
    data: { id: `h-${seq}`, role: "user", content: [{ type: "text", text }], source: { kind: "user" } },
    surfaceOp: "append"
  } as unknown as Event))
})

/** Store a session through the store's own create and append (as a writer would). */
export const seed = (store: SessionStoreShape, session: { header: object; events: ReadonlyArray<Event> }, id?: string) =>
  Effect.gen(function*() {
    const header = id === undefined ? session.header : { ...session.header, id }
    const created = yield* store.create(header)
    yield* store.append(created.id, session.events, { expectedSeq: 0 })
    return created.id
  })

/** The web app as the CLI's build bundles it (scripts/build-view.mjs). */
export const bundleAssets = (): Promise<ViewAssets> =>
  import(join(__dirname, "../../scripts/build-view.mjs")).then((m) => m.bundleView() as Promise<ViewAssets>)

/**
 * The viewer served on a free port of 127.0.0.1 over `store` for this scope: its base URL.
 */
export const serve = (store: SessionStoreShape, assets: ViewAssets = { appJs: "", appCss: "" }, session?: string) =>
  Effect.gen(function*() {
    const app = makeApp({ token: TOKEN, assets, ...(session === undefined ? {} : { session }) })
    const layer = Layer.unwrapScoped(Effect.map(app, (a) => HttpServer.serve(a))).pipe(
      Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })),
      Layer.provide(Layer.succeed(SessionStore, store))
    )
    const ctx = yield* Layer.build(layer)
    const address = yield* HttpServer.addressFormattedWith(Effect.succeed).pipe(Effect.provide(ctx))
    return address
  })

/** GET a path of the server (with the token unless `token` is null); status, headers and body. */
export const get = (base: string, path: string, token: string | null = TOKEN) =>
  Effect.promise(async () => {
    const res = await fetch(`${base}${path}`, token === null ? {} : { headers: { "x-session-log-token": token } })
    const text = await res.text()
    let body: any = undefined
    try {
      body = JSON.parse(text)
    } catch {
      body = text
    }
    return { status: res.status, headers: res.headers, body }
  })

/** A `session-log view` process started by `startViewer`. */
export interface Viewer {
  /** The URL it printed (with the token and, when named, the session). */
  readonly url: string
  readonly origin: string
  readonly token: string
  readonly stderr: () => string
  readonly stop: () => Promise<void>
}

/**
 * Start `session-log view <args> --port 0` on the CLI bundle and wait for the URL it prints (a
 * condition, not a time); a process that exits first rejects with its output.
 */
export const startViewer = (
  bundle: string,
  args: ReadonlyArray<string>,
  cwd: string,
  env: Readonly<Record<string, string>> = {}
): Promise<Viewer> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, "view", ...args, "--port", "0"], {
      cwd,
      env: { ...process.env, NO_COLOR: "1", SESSION_LOG_BUNDLE: bundle, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    const exited = new Promise<void>((r) => child.once("exit", () => r()))
    child.stderr.on("data", (d) => void (err += String(d)))
    child.stdout.on("data", (d) => {
      out += String(d)
      const m = /session-log view: (\S+)/.exec(out)
      if (m === null) return
      const url = new URL(m[1])
      resolvePromise({
        url: m[1],
        origin: url.origin,
        token: url.searchParams.get("token") ?? "",
        stderr: () => err,
        stop: () => {
          if (child.exitCode === null) child.kill("SIGTERM")
          return exited
        }
      })
    })
    child.once("exit", (code) => reject(new Error(`session-log view exited (${code}) before printing its URL:\n${out}\n${err}`)))
  })
