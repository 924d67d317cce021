/**
 * Spans (issue 12 point 5): a user who provides a tracer (e.g. `@effect/opentelemetry`) sees the
 * session's work as spans — create, a model call, a turn, a compaction, open with its repair,
 * inspect, verify, and each append once `TraceAppends` is on — here recorded by a minimal
 * in-memory tracer.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import * as SessionLive from "../src/layers/session/SessionLive.js"
import { layerSummarizerDeterministic } from "../src/layers/model/SummarizerLive.js"
import * as AgentLoop from "../src/programs/agent/AgentLoop.js"
import * as Compact from "../src/programs/compaction/Compact.js"
import * as Verify from "../src/programs/Verify.js"
import { Session, TraceAppends } from "../src/services/Session.js"
import { backends, environment, route, system, toolkit } from "./agent/helpers.js"

/** A tracer that records the name of every span it starts. */
const recordingTracer = (names: Array<string>): Tracer.Tracer =>
  Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      names.push(name)
      return new RecordedSpan(name, parent, context, links, startTime, kind)
    },
    context: (f) => f()
  })

class RecordedSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly spanId = Math.random().toString(16).slice(2)
  readonly traceId = "trace"
  readonly sampled = true
  status: Tracer.SpanStatus
  attributes = new Map<string, unknown>()
  events: Array<unknown> = []
  constructor(
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Tracer.Span["context"],
    readonly links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind
  ) {
    this.status = { _tag: "Started", startTime }
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>) {
    this.status = { _tag: "Ended", startTime: (this.status as { startTime: bigint }).startTime, endTime, exit }
  }
  attribute(key: string, value: unknown) {
    this.attributes.set(key, value)
  }
  event(name: string) {
    this.events.push(name)
  }
  addLinks() {}
}

const scripts = [[{ type: "text", text: "Hello there." }, { type: "finish", reason: "stop" }]] as const

describe("spans", () => {
  it.scoped("create, append, model call, turn, compaction, open + repair, inspect and verify are traced", () => {
    const names: Array<string> = []
    return Effect.gen(function*() {
      const id = "traced"
      yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* SessionLive.create({ id })
        yield* AgentLoop.make({ toolkit, system, route }).runTurn([{ type: "user", content: "hi" }]).pipe(
          Effect.provideService(Session, session)
        )
        yield* Effect.either(Compact.compact({ mode: "manual" }).pipe(Effect.provideService(Session, session)))
      }))
      yield* Effect.scoped(SessionLive.open(id))
      yield* SessionLive.inspect(id)
      yield* Verify.verifySession(id)
      for (
        const name of [
          "Session.create",
          "Session.append",
          "LanguageModel.streamText",
          "AgentLoop.runTurn",
          "Compact.compact",
          "Session.open",
          "Session.repair",
          "Session.inspect",
          "Verify.verifySession"
        ]
      ) assert.include(names, name)
    }).pipe(
      Effect.provide(Layer.merge(environment(backends[0].layer(), scripts), layerSummarizerDeterministic)),
      Effect.provideService(TraceAppends, true),
      Effect.withTracer(recordingTracer(names))
    )
  })

  it.scoped("without TraceAppends an append records no span of its own (the hot path), the rest still does", () => {
    const names: Array<string> = []
    return Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "untraced" })
      yield* session.append("turn/start", { turn: 1 })
      assert.include(names, "Session.create")
      assert.notInclude(names, "Session.append")
    }).pipe(
      Effect.provide(environment(backends[0].layer(), [])),
      Effect.withTracer(recordingTracer(names))
    )
  })
})
