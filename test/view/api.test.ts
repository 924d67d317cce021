/**
 * The viewer's JSON API (docs/viewer.md "The JSON API") on every backend: the token, the
 * sessions with their status, paged timelines, time travel equal to the core's request at a seq,
 * provenance both ways, a log that fails to load, and nothing outside the API reachable.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { writeFileSync } from "node:fs"
import { make as makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { make as makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { make as makePostgresStore } from "../../src/layers/sql/postgres/PostgresStore.js"
import { make as makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { CSP } from "../../src/programs/view/Server.js"
import { requestAtLog } from "../../src/services/RequestAt.js"
import type { SessionStoreShape } from "../../src/services/SessionStore.js"
import { describePg, freshUrl } from "../postgres/helpers.js"
import { demo, get, hostileSession, HOSTILE_TEXTS, seed, serve, TOKEN } from "./helpers.js"

interface Backend {
  readonly name: string
  readonly open: Effect.Effect<{ store: SessionStoreShape; dir?: string }, unknown, Scope.Scope>
}

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "view-api-" })).pipe(
  Effect.provide(NodeContext.layer)
)

const backends: ReadonlyArray<Backend> = [
  { name: "memory", open: Effect.map(makeMemoryStore(), (store) => ({ store })) },
  {
    name: "jsonl",
    open: Effect.flatMap(tempDir, (dir) =>
      Effect.map(makeJsonlStore({ root: dir }).pipe(Effect.provide(NodeContext.layer)), (store) => ({ store, dir })))
  },
  {
    name: "sqlite",
    open: Effect.flatMap(tempDir, (dir) => Effect.map(makeSqliteStore({ filename: `${dir}/s.db` }), (store) => ({ store })))
  }
]

const { events: demoEvents } = demo()

/** A server-sent event stream of `{count}` documents: its content type, the next count, and closing it. */
const sseCounts = async (url: string) => {
  const controller = new AbortController()
  const res = await fetch(url, { signal: controller.signal })
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  const counts: Array<number> = []
  return {
    type: res.headers.get("content-type"),
    next: async (): Promise<number> => {
      while (counts.length === 0) {
        const { done, value } = await reader.read()
        if (done) throw new Error("the event stream ended")
        buffer += decoder.decode(value, { stream: true })
        let end: number
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const data = /^data: (.*)$/m.exec(buffer.slice(0, end))
          buffer = buffer.slice(end + 2)
          if (data !== null) counts.push(JSON.parse(data[1]).count)
        }
      }
      return counts.shift()!
    },
    close: async () => controller.abort()
  }
}

/** The viewer served over a backend holding the demo and the hostile session (one per backend block). */
class Served extends Context.Tag("test/view/Served")<Served, { readonly base: string; readonly store: SessionStoreShape }>() {}

const apiSuite = (backend: Backend) => {
  const served = Layer.scoped(
    Served,
    Effect.gen(function*() {
      const opened = yield* backend.open
      yield* seed(opened.store, demo())
      yield* seed(opened.store, hostileSession())
      return { base: yield* serve(opened.store), store: opened.store }
    }).pipe(Effect.orDie)
  )
  layer(served, { timeout: 60_000, excludeTestServices: true })(backend.name, (it) => {
    const setup = Served

    it.effect("every API request needs the token; the app's page does not; every response carries the CSP", () =>
      Effect.gen(function*() {
        const { base } = yield* setup
        const missing = yield* get(base, "/api/sessions", null)
        assert.strictEqual(missing.status, 401)
        assert.strictEqual(missing.body.error, "Unauthorized")
        assert.strictEqual((yield* get(base, "/api/sessions", "wrong-token-0123456789abcd")).status, 401)
        assert.strictEqual((yield* get(base, "/api/sessions/demo-session/events", null)).status, 401)
        const ok = yield* get(base, "/api/sessions")
        assert.strictEqual(ok.status, 200)
        assert.strictEqual(ok.headers.get("content-security-policy"), CSP)
        const page = yield* get(base, "/", null)
        assert.strictEqual(page.status, 200)
        assert.strictEqual(page.headers.get("content-security-policy"), CSP)
      }))

    it.effect("the sessions: size, last activity, preview and a verify status", () =>
      Effect.gen(function*() {
        const { base } = yield* setup
        const { body } = yield* get(base, "/api/sessions")
        const byId = new Map<string, any>(body.sessions.map((s: any) => [s.id, s]))
        const d = byId.get("demo-session")
        assert.strictEqual(d.events, demoEvents.length)
        assert.strictEqual(d.lastActivity, demoEvents[demoEvents.length - 1].time)
        assert.strictEqual(d.preview, "What is in this repository?")
        assert.strictEqual(d.problem, null)
        assert.strictEqual(byId.get("hostile").events, HOSTILE_TEXTS.length)
      }))

    it.effect("a page of the timeline: only the page, chunk runs folded, tool calls paired with results", () =>
      Effect.gen(function*() {
        const { base } = yield* setup
        const { body, status } = yield* get(base, "/api/sessions/demo-session/events?offset=0&limit=40")
        assert.strictEqual(status, 200)
        assert.strictEqual(body.total, demoEvents.length)
        // the rows cover exactly events 0..39
        assert.strictEqual(body.rows[0].seq, 0)
        assert.strictEqual(body.rows[body.rows.length - 1].lastSeq, 39)
        const run = body.rows.find((r: any) => r.seq === 5)
        assert.strictEqual(run.type, "assistant/chunk")
        assert.strictEqual(run.lastSeq, 17)
        assert.include(run.text, "Let me look at the files.")
        assert.deepStrictEqual(run.usage, { inputTokens: 300, outputTokens: 20 })
        const call = body.rows.find((r: any) => r.seq === 19)
        assert.strictEqual(call.type, "tool/call")
        assert.strictEqual(call.pairedSeq, 20)
        const later = yield* get(base, "/api/sessions/demo-session/events?offset=180&limit=40")
        assert.strictEqual(later.body.rows[0].seq, 180)
        assert.strictEqual(later.body.rows[later.body.rows.length - 1].lastSeq, demoEvents.length - 1)
        assert.strictEqual((yield* get(base, "/api/sessions/demo-session/events?limit=100000")).status, 400)
        assert.strictEqual((yield* get(base, "/api/sessions/demo-session/events?offset=-1")).status, 400)
      }))

    it.effect("time travel before and after a compaction: the request the core rebuilds at that seq", () =>
      Effect.gen(function*() {
        const { base } = yield* setup
        for (const seq of [3, 131, 133, demoEvents.length - 1]) {
          const { body, status } = yield* get(base, `/api/sessions/demo-session/at/${seq}`)
          assert.strictEqual(status, 200)
          const expected = requestAtLog(demoEvents, seq)
          assert.ok(!("_tag" in expected))
          assert.deepStrictEqual(body.at.request.messages, JSON.parse(JSON.stringify(expected.messages)))
          assert.deepStrictEqual(body.at.request.header, JSON.parse(JSON.stringify(expected.header ?? null)))
        }
        const before = (yield* get(base, "/api/sessions/demo-session/at/131")).body.at
        const after = (yield* get(base, "/api/sessions/demo-session/at/133")).body.at
        assert.ok(before.surface.nodes.includes(2))
        assert.notOk(after.surface.nodes.includes(2))
        assert.strictEqual(after.surface.replacements.at(-1).seq, 133)
        const lastHeader = demoEvents.filter((e) => e.type === "request/header" && e.seq <= 133).at(-1)!
        assert.strictEqual(after.headerSeq, lastHeader.seq)
        assert.strictEqual(after.headerReason, (lastHeader.data as any).reason)
        assert.strictEqual((yield* get(base, `/api/sessions/demo-session/at/${demoEvents.length}`)).status, 404)
      }))

    it.effect("provenance both ways: what a summary is made of, and what replaced an event", () =>
      Effect.gen(function*() {
        const { base } = yield* setup
        const summary = (yield* get(base, "/api/sessions/demo-session/provenance/133")).body
        assert.deepStrictEqual(summary.provenance.replaced, { seq: 133, start: 2, end: 81, shadowedSeqs: [2, 18, 20, 35, 79, 57, 62, 74, 81] })
        const sources = demoEvents[133].sourceEventSeqs ?? []
        assert.deepStrictEqual(summary.provenance.sources, sources)
        assert.deepStrictEqual(
          summary.related.map((r: any) => r.seq),
          [...new Set([2, 18, 20, 35, 57, 62, 74, 79, 81, ...sources])].sort((a, b) => a - b)
        )
        const shadowed = (yield* get(base, "/api/sessions/demo-session/provenance/2")).body
        assert.deepStrictEqual(shadowed.provenance.shadowedBy.map((r: any) => r.seq), [133])
        // a pruned tool result: shadowed by the prune, whose replacement shows what was pruned
        const pruned = (yield* get(base, "/api/sessions/demo-session/provenance/37")).body
        assert.deepStrictEqual(pruned.provenance.shadowedBy.map((r: any) => r.seq), [79])
      }))

    it.effect("nothing but the API is reachable; an unknown session is 404", () =>
      Effect.gen(function*() {
        const { base } = yield* setup
        for (const path of ["/etc/passwd", "/../../etc/passwd", "/api/sessions/../../package.json", "/api/nothing", "/src/index.ts"]) {
          assert.strictEqual((yield* get(base, path)).status, 404, path)
        }
        const missing = yield* get(base, "/api/sessions/no-such-session/events")
        assert.strictEqual(missing.status, 404)
        assert.strictEqual(missing.body.problem.tag, "SessionNotFound")
      }))

    it.effect("live: the count now, then each commit, as server-sent events from the store's follow", () =>
      Effect.gen(function*() {
        const { base, store } = yield* setup
        const id = yield* seed(store, { header: demo().header, events: demoEvents.slice(0, 5) }, `sse-${backend.name}`)
        // refused without the token or with a wrong one: JSON, not an event stream (an EventSource
        // fails on it instead of reconnecting), and the head the app then asks says why
        for (const token of [null, "wrong-token-0123456789abcd"]) {
          const refused = yield* get(base, `/api/sessions/${id}/live`, token)
          assert.strictEqual(refused.status, 401)
          assert.strictEqual(refused.headers.get("content-type"), "application/json; charset=utf-8")
          assert.strictEqual(refused.body.error, "Unauthorized")
          assert.strictEqual((yield* get(base, `/api/sessions/${id}/head`, token)).status, 401)
        }
        assert.strictEqual((yield* get(base, "/api/sessions/no-such-session/live")).status, 404)
        const events = yield* Effect.acquireRelease(
          Effect.promise(() => sseCounts(`${base}/api/sessions/${id}/live?token=${TOKEN}`)),
          (r) => Effect.promise(() => r.close())
        )
        assert.strictEqual(events.type, "text/event-stream; charset=utf-8")
        assert.strictEqual(yield* Effect.promise(() => events.next()), 5)
        yield* store.append(id, demoEvents.slice(5, 12), { expectedSeq: 5 })
        // a condition, not a time: the pushed counts reach 12
        let count = 5
        while (count < 12) count = yield* Effect.promise(() => events.next())
        assert.strictEqual(count, 12)
        assert.strictEqual((yield* get(base, `/api/sessions/${id}/events?offset=10&limit=10`)).body.total, 12)
      }).pipe(Effect.scoped))

    it.effect("session text comes back as data, byte for byte", () =>
      Effect.gen(function*() {
        const { base } = yield* setup
        const { body } = yield* get(base, "/api/sessions/hostile/events")
        assert.deepStrictEqual(body.rows.map((r: any) => r.text), HOSTILE_TEXTS)
      }))
  })
}

describe("view API", () => {
  for (const backend of backends) apiSuite(backend)
  describePg("postgres", () =>
    apiSuite({ name: "postgres", open: Effect.flatMap(freshUrl, (url) => Effect.map(makePostgresStore({ url }), (store) => ({ store }))) }))

  it.scoped("a log that fails to load: the rule, the seq and the line, and what loads of it", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const lines = [
        JSON.stringify({ type: "session", version: 1, id: "broken", createdAt: 1 }),
        ...demoEvents.slice(0, 10).map((e) => JSON.stringify(e)),
        // H5: a user message whose content is no array
        JSON.stringify({
          type: "user/message",
          seq: 10,
          time: 5,
          data: { id: "x", role: "user", content: "not an array", source: { kind: "user" } },
          surfaceOp: "append"
        }),
        JSON.stringify(demoEvents[11]),
        ""
      ]
      writeFileSync(`${dir}/broken.jsonl`, lines.join("\n"))
      const store = yield* makeJsonlStore({ root: dir }).pipe(Effect.provide(NodeContext.layer))
      const base = yield* serve(store)
      const list = (yield* get(base, "/api/sessions")).body.sessions
      assert.strictEqual(list[0].id, "broken")
      assert.isNotNull(list[0].problem)
      const page = (yield* get(base, "/api/sessions/broken/events")).body
      assert.strictEqual(page.problem.rule, "H5")
      assert.strictEqual(page.problem.seq, 10)
      assert.strictEqual(page.total, 10)
      assert.strictEqual(page.rows.at(-1).lastSeq, 9)
    }))

  it.scoped("a torn tail is shown with its line, the events before it load", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const lines = [
        JSON.stringify({ type: "session", version: 1, id: "torn", createdAt: 1 }),
        ...demoEvents.slice(0, 10).map((e) => JSON.stringify(e)),
        "{not json",
        ""
      ]
      writeFileSync(`${dir}/torn.jsonl`, lines.join("\n"))
      const store = yield* makeJsonlStore({ root: dir }).pipe(Effect.provide(NodeContext.layer))
      const base = yield* serve(store)
      const page = (yield* get(base, "/api/sessions/torn/events")).body
      assert.strictEqual(page.problem, null)
      assert.deepStrictEqual(page.tornTail, { fromSeq: 10, reason: "unparsable", line: 12 })
      assert.strictEqual(page.total, 10)
    }))
})
