/**
 * What `session-log view` runs once it is asked (docs/viewer.md), loaded on first need so that no
 * other command parses it: the viewer's app (`view/Server.ts`) over a store opened read-only, on
 * Node's HTTP server, and the web app's bundle that scripts/build-cli.mjs defines into this chunk.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { createServer } from "node:http"
import { makeApp, type ViewAssets } from "../view/Server.js"
import { SessionStore, type SessionStoreShape } from "../../services/SessionStore.js"

// defined by scripts/build-cli.mjs (the app bundled by scripts/build-view.mjs); absent when the
// sources run unbundled
declare const __SESSION_LOG_VIEW_JS__: string | undefined
declare const __SESSION_LOG_VIEW_CSS__: string | undefined

/** The bundled web app, or none (the sources run without the build). */
export const bundledAssets = (): ViewAssets | undefined =>
  typeof __SESSION_LOG_VIEW_JS__ === "undefined" || typeof __SESSION_LOG_VIEW_CSS__ === "undefined"
    ? undefined
    : { appJs: __SESSION_LOG_VIEW_JS__, appCss: __SESSION_LOG_VIEW_CSS__ }

/** Hosts that keep the viewer on this machine. */
const LOOPBACK: ReadonlySet<string> = new Set(["127.0.0.1", "localhost", "::1"])

/** Whether a host keeps the server on this machine. */
export const isLoopback = (host: string): boolean => LOOPBACK.has(host)

/**
 * Serve the viewer over `store` until interrupted: prints the URL (with the token, and the
 * session when one is named) on stdout once the server listens.
 */
export const serveView = (options: {
  readonly store: SessionStoreShape
  readonly assets: ViewAssets
  readonly token: string
  readonly host: string
  readonly port: number
  readonly session?: string
  readonly onUrl?: (url: string) => Effect.Effect<void>
}) => {
  // the app's indexes and their followers live as long as the server
  const app = makeApp({
    token: options.token,
    assets: options.assets,
    ...(options.session === undefined ? {} : { session: options.session })
  })
  const announce = Layer.effectDiscard(
    HttpServer.addressWith((address) => {
      const port = address._tag === "TcpAddress" ? address.port : 0
      const host = options.host.includes(":") ? `[${options.host}]` : options.host
      const url = `http://${host}:${port}/?token=${options.token}` +
        (options.session === undefined ? "" : `#session=${encodeURIComponent(options.session)}`)
      return Effect.zipRight(Console.log(`session-log view: ${url}`), options.onUrl?.(url) ?? Effect.void)
    })
  )
  const server = NodeHttpServer.layer(() => createServer(), { port: options.port, host: options.host })
  return Layer.launch(
    Layer.mergeAll(Layer.unwrapScoped(Effect.map(app, (a) => HttpServer.serve(a))), announce).pipe(
      Layer.provide(server),
      Layer.provide(Layer.succeed(SessionStore, options.store))
    )
  )
}
