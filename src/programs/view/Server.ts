/**
 * The viewer's HTTP app (docs/viewer.md): the bundled web app (`/`, `/app.js`) and the JSON API
 * (`/api/...`) over the `SessionStore` Tag. Every API request needs the token printed at start
 * (`?token=` or the `X-Session-Log-Token` header); nothing but the store is reachable; every
 * response carries a strict Content-Security-Policy. Composed with a store and a server only in
 * the CLI (`ViewCommand`).
 *
 * @since 0.2.0
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { encodeJson, type Json } from "../../schema/Json.js"
import { SessionStore } from "../../services/SessionStore.js"
import { makeViewData, MAX_PAGE, type Progress, type ViewDataOptions } from "./ViewData.js"

/**
 * What the server serves besides the API: the bundled web app.
 *
 * @since 0.2.0
 * @category models
 */
export interface ViewAssets {
  readonly appJs: string
  readonly appCss: string
}

/**
 * Options of the viewer's app.
 *
 * @since 0.2.0
 * @category models
 */
export interface ViewOptions extends ViewDataOptions {
  readonly token: string
  readonly assets: ViewAssets
  /** The session to open first (`--session`). */
  readonly session?: string
}

/**
 * The Content-Security-Policy of every response: scripts and styles from this origin only, no
 * inline script, no plugins, no framing, API calls to this origin only.
 *
 * @since 0.2.0
 * @category constants
 */
export const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const SECURITY_HEADERS = {
  "content-security-policy": CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store"
}

const jsonResponse = (value: unknown, status = 200) =>
  HttpServerResponse.text(encodeJson(value as Json), { status, contentType: "application/json; charset=utf-8" })

/** Constant-time comparison of two strings (the token check). */
const sameToken = (a: string, b: string): boolean => {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}

const intParam = (value: string | Array<string> | undefined, fallback: number): number | undefined => {
  if (value === undefined) return fallback
  const s = Array.isArray(value) ? value[0] : value
  return /^\d{1,15}$/.test(s) ? Number(s) : undefined
}

const badRequest = (detail: string) => jsonResponse({ error: "BadRequest", detail }, 400)

/** `?wait=0` and `?reread=0` (docs/viewer.md "First open"): answer with what is indexed so far. */
const progressOf = Effect.map(HttpServerRequest.ParsedSearchParams, (search): Progress => {
  const no = (v: string | Array<string> | undefined) => (Array.isArray(v) ? v[0] : v) === "0"
  return { wait: !no(search.wait), reread: !no(search.reread) }
})

/**
 * The index page: the app's script and style from this origin, the token and first session in
 * data attributes (read by the app, never interpreted as HTML).
 *
 * @since 0.2.0
 * @category utils
 */
export const indexHtml = (options: { readonly session?: string }): string =>
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>session-log view</title>
<link rel="stylesheet" href="/app.css">
</head>
<body data-session="${escapeAttribute(options.session ?? "")}">
<noscript>The session-log viewer needs JavaScript.</noscript>
<script src="/app.js"></script>
</body>
</html>
`

/**
 * A string escaped for an HTML attribute value or text node.
 *
 * @since 0.2.0
 * @category utils
 */
export const escapeAttribute = (s: string): string =>
  s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/'/g, "&#39;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

/** One server-sent event carrying `value` as JSON. */
const sseEvent = (value: unknown) => `data: ${encodeJson(value as Json)}\n\n`

/**
 * The viewer's HTTP app over the SessionStore Tag; the sessions' indexes and their followers live
 * as long as the scope.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeApp = Effect.fn("ViewServer.makeApp")(function*(options: ViewOptions) {
  const store = yield* SessionStore
  const { headOf, listSessions, live, provenanceAt, timelinePage, timeTravelAt } = yield* makeViewData(store, options)
  const requireToken = <E, R>(handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const search = yield* HttpServerRequest.ParsedSearchParams
      const fromQuery = search.token
      const given = request.headers["x-session-log-token"] ?? (Array.isArray(fromQuery) ? fromQuery[0] : fromQuery)
      if (given === undefined || !sameToken(given, options.token)) {
        return jsonResponse({ error: "Unauthorized", detail: "a token is required: open the URL `session-log view` printed" }, 401)
      }
      return yield* handler
    })
  const sessionId = Effect.map(HttpRouter.params, (p) => p.id ?? "")
  const notFound = (problem: { readonly tag: string } | null) => problem !== null && problem.tag === "SessionNotFound"
  const router = HttpRouter.empty.pipe(
    HttpRouter.get("/", Effect.succeed(HttpServerResponse.text(indexHtml(options), { contentType: "text/html; charset=utf-8" }))),
    HttpRouter.get(
      "/app.js",
      Effect.succeed(HttpServerResponse.text(options.assets.appJs, { contentType: "text/javascript; charset=utf-8" }))
    ),
    HttpRouter.get(
      "/app.css",
      Effect.succeed(HttpServerResponse.text(options.assets.appCss, { contentType: "text/css; charset=utf-8" }))
    ),
    HttpRouter.get("/favicon.ico", Effect.succeed(HttpServerResponse.empty({ status: 204 }))),
    HttpRouter.get(
      "/api/sessions",
      requireToken(Effect.flatMap(progressOf, (progress) => Effect.map(listSessions(progress), (sessions) => jsonResponse({ sessions }))))
    ),
    HttpRouter.get(
      "/api/sessions/:id/events",
      requireToken(Effect.gen(function*() {
        const id = yield* sessionId
        const search = yield* HttpServerRequest.ParsedSearchParams
        const offset = intParam(search.offset, 0)
        const limit = intParam(search.limit, 200)
        if (offset === undefined || limit === undefined) return badRequest("offset and limit are non-negative integers")
        if (limit > MAX_PAGE) return badRequest(`limit is at most ${MAX_PAGE}`)
        const page = yield* timelinePage(id, offset, limit, yield* progressOf)
        return jsonResponse(page, notFound(page.problem) ? 404 : 200)
      }))
    ),
    HttpRouter.get(
      "/api/sessions/:id/head",
      requireToken(Effect.flatMap(Effect.zip(sessionId, progressOf), ([id, progress]) =>
        Effect.map(headOf(id, progress), (head) => jsonResponse(head, notFound(head.problem) ? 404 : 200))))
    ),
    HttpRouter.get(
      "/api/sessions/:id/live",
      // server-sent events (EventSource sends the token in the query): the count now, then each
      // time the store's follow sees the log grow
      requireToken(Effect.flatMap(sessionId, (id) =>
        Effect.map(headOf(id), (head) =>
          notFound(head.problem) ? jsonResponse(head, 404) : HttpServerResponse.stream(
          Stream.concat(
            Stream.make("retry: 1000\n\n"),
            Stream.map(live(id), (count) => sseEvent({ count }))
          ).pipe(Stream.encodeText),
          { contentType: "text/event-stream; charset=utf-8" }
        ))))
    ),
    HttpRouter.get(
      "/api/sessions/:id/at/:seq",
      requireToken(Effect.gen(function*() {
        const id = yield* sessionId
        const seq = intParam((yield* HttpRouter.params).seq, -1)
        if (seq === undefined) return badRequest("seq is a non-negative integer")
        const r = yield* timeTravelAt(id, seq)
        return jsonResponse(r, notFound(r.problem) || r.at === null ? 404 : 200)
      }))
    ),
    HttpRouter.get(
      "/api/sessions/:id/provenance/:seq",
      requireToken(Effect.gen(function*() {
        const id = yield* sessionId
        const seq = intParam((yield* HttpRouter.params).seq, -1)
        if (seq === undefined) return badRequest("seq is a non-negative integer")
        const r = yield* provenanceAt(id, seq)
        return jsonResponse(r, notFound(r.problem) || r.provenance === null ? 404 : 200)
      }))
    ),
    // a store failure is a 500 with its tag
    HttpRouter.catchAll((e) => Effect.succeed(jsonResponse({ error: e._tag, detail: e.message }, 500)))
  )
  // nothing but these routes is reachable (404)
  return router.pipe(
    Effect.catchTag("RouteNotFound", () => Effect.succeed(jsonResponse({ error: "NotFound" }, 404))),
    Effect.map(HttpServerResponse.setHeaders(SECURITY_HEADERS))
  )
})
