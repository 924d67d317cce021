/**
 * `session-log view` (docs/viewer.md, docs/cli.md): a local web viewer over a store, read-only
 * (the store is opened as the reading commands open it). Binds 127.0.0.1 unless `--host` says
 * otherwise (then it warns); every API request needs the random token printed in the URL. The
 * server and the web app are a chunk loaded only by this command (`ViewServe`).
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as PlatformCommand from "@effect/platform/Command"
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { randomBytes } from "node:crypto"
import { resolveSpec, runCommand, store } from "./CommandSupport.js"
import { openExistingStore, UsageError } from "./Target.js"

const session = Options.text("session").pipe(
  Options.optional,
  Options.withPseudoName("<id>"),
  Options.withDescription("the session to open first")
)
const port = Options.integer("port").pipe(
  Options.withDefault(8737),
  Options.withPseudoName("<n>"),
  Options.withDescription("the port to listen on (0: any free port; default 8737)")
)
const host = Options.text("host").pipe(
  Options.withDefault("127.0.0.1"),
  Options.withPseudoName("<host>"),
  Options.withDescription("the address to bind (default 127.0.0.1: this machine only; anything else warns)")
)
const open = Options.boolean("open").pipe(
  Options.withDescription("open the URL in the default browser (xdg-open / open; SESSION_LOG_OPENER names another program)")
)

/**
 * The program `--open` runs with the URL: SESSION_LOG_OPENER when set (a browser of the user's
 * choice, or a test's recorder), else the platform's opener.
 */
const opener = (): string => {
  const chosen = process.env.SESSION_LOG_OPENER
  return chosen !== undefined && chosen !== "" ? chosen : process.platform === "darwin" ? "open" : "xdg-open"
}

/** Open a URL with the opener; a failure only warns (the URL is printed anyway). */
const openBrowser = (url: string) =>
  PlatformCommand.make(opener(), url).pipe(
    PlatformCommand.exitCode,
    Effect.catchAll(() => Effect.logWarning("view: could not open a browser; open the URL printed above")),
    Effect.asVoid
  )

/** The web app bundled from the repository's sources (esbuild, a development dependency), if they are there. */
const bundleFromSources = Effect.tryPromise(() => {
  const script = new URL("../../../scripts/build-view.mjs", import.meta.url).href
  return (import(script) as Promise<{ bundleView: () => Promise<{ appJs: string; appCss: string }> }>).then((m) => m.bundleView())
}).pipe(Effect.orElseSucceed(() => undefined))

/** `view`. */
export const viewCommand = Command.make("view", { store, session, port, host, open }, (o) =>
  runCommand(
    false,
    Effect.gen(function*() {
      if (o.port < 0 || o.port > 65535) return yield* new UsageError({ detail: `--port ${o.port} is not a port (0..65535)` })
      const spec = yield* resolveSpec(o.store)
      // read-only, as the reading commands: nothing is created, locked or written
      const s = yield* openExistingStore(spec, { readOnly: true })
      const { bundledAssets, isLoopback, serveView } = yield* Effect.promise(() => import("./ViewServe.js"))
      // the sources run through tsx (bin/session-log.js in the repository, sources newer than the
      // bundle): the app is bundled now, as the build does
      const assets = bundledAssets() ?? (yield* bundleFromSources)
      if (assets === undefined) {
        return yield* new UsageError({ detail: "the viewer's web app is not built: run `npm run build:cli` first" })
      }
      if (!isLoopback(o.host)) {
        yield* Effect.logWarning(
          `view: listening on ${o.host}, reachable from other machines; anyone with the URL's token can read every session of the store`
        )
      }
      // the edge: a random token per run (never logged elsewhere, never stored)
      const token = randomBytes(24).toString("hex")
      const executor = yield* CommandExecutor.CommandExecutor
      return yield* serveView({
        store: s,
        assets,
        token,
        host: o.host,
        port: o.port,
        ...(Option.isSome(o.session) ? { session: o.session.value } : {}),
        ...(o.open ? { onUrl: (url: string) => Effect.provideService(openBrowser(url), CommandExecutor.CommandExecutor, executor) } : {})
      })
    }),
    () => Effect.void
  )).pipe(Command.withDescription("a local web viewer over --store: sessions, timeline, time travel, provenance (read-only)"))
