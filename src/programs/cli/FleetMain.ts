/**
 * What `fleet runner` and `fleet prompt` run, loaded on first use (the cluster, the RPC layer and
 * the entity stay out of every other command): a runner — the `AgentSession` behaviour over the
 * PostgreSQL store, registered on a socket runner whose cluster state is in the same database —
 * and a client that sends one prompt. The keyless fleet model answers "You said: <prompt>"; a
 * prompt starting `sleep <ms>` waits that long inside its model call first (a turn that is
 * mid-flight long enough to kill its runner, for the tests and the bench).
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { layerClient, layerRunner } from "../../layers/fleet/FleetRunner.js"
import { make as makeScriptedLanguageModel } from "../../layers/model/ScriptedLanguageModel.js"
import * as HeaderSnapshotterLive from "../../layers/session/HeaderSnapshotterLive.js"
import * as SessionLive from "../../layers/session/SessionLive.js"
import * as PostgresStore from "../../layers/sql/postgres/PostgresStore.js"
import { nextId } from "../../services/IdGenerator.js"
import * as Fleet from "../fleet/Fleet.js"
import { modelModule } from "./AcpCommand.js"

const lastUserText = (prompt: Prompt.Prompt): string => {
  const last = prompt.content[prompt.content.length - 1]
  if (last === undefined || last.role !== "user") return ""
  return last.content.flatMap((p) => p.type === "text" ? [p.text] : []).join("\n")
}

/** The keyless model of a fleet: "You said: <text>", after `sleep <ms>` when the prompt asks. */
export const keylessFleetModel: Layer.Layer<LanguageModel.LanguageModel> = Layer.effect(
  LanguageModel.LanguageModel,
  Effect.gen(function*() {
    const { handle, model } = yield* makeScriptedLanguageModel({ scripts: [], requireConsumed: false })
    const feed = (options: { readonly prompt: Prompt.RawInput }) => {
      const text = lastUserText(options.prompt as Prompt.Prompt).trim()
      const sleep = /^sleep (\d+)\b/.exec(text)
      return Effect.zipRight(
        sleep === null ? Effect.void : Effect.sleep(Number(sleep[1])),
        handle.push([
          { type: "text", text: `You said: ${text}` },
          { type: "finish", reason: "stop", usage: { inputTokens: 10, outputTokens: 5 } }
        ])
      )
    }
    return {
      ...model,
      streamText: (options) => Stream.unwrap(Effect.as(feed(options), model.streamText(options))),
      generateText: (options) => Effect.zipRight(feed(options), model.generateText(options))
    } as LanguageModel.Service
  })
)

/** What a runner serves: the entity's behaviour over the store, the model and the snapshotter. */
export const behaviour = (options: {
  readonly url: string
  readonly model: Layer.Layer<LanguageModel.LanguageModel>
  readonly route: { readonly provider: string; readonly model: string }
}) =>
  Fleet.layer({ toolkit: Toolkit.empty, system: "You are an agent of a session-log fleet.", route: options.route }).pipe(
    Layer.provide(Fleet.layerSessionFactory({ create: SessionLive.create, open: SessionLive.open })),
    Layer.provide(PostgresStore.layer({ url: options.url })),
    Layer.provide(Layer.merge(options.model, HeaderSnapshotterLive.layer)),
    Layer.provide(Toolkit.empty.toLayer({}))
  )

/** Run a runner until interrupted; "runner <host:port> ready" on stderr once it serves. */
export const runRunner = (options: {
  readonly url: string
  readonly listen: { readonly host: string; readonly port: number }
  readonly advertise: { readonly host: string; readonly port: number }
  readonly model: string | undefined
  readonly lockExpirationMs: number | undefined
}) =>
  Effect.gen(function*() {
    const model = options.model === undefined
      ? { layer: keylessFleetModel, route: { provider: "scripted", model: "keyless-fleet" } }
      : yield* modelModule(options.model)
    const runner = layerRunner({
      url: options.url,
      listen: options.listen,
      advertise: options.advertise,
      ...(options.lockExpirationMs === undefined ? {} : { lockExpirationMs: options.lockExpirationMs })
    })
    const ready = Layer.effectDiscard(Effect.sync(() => {
      process.stderr.write(`runner ${options.advertise.host}:${options.advertise.port} ready\n`)
    }))
    return yield* Layer.launch(
      ready.pipe(Layer.provide(behaviour({ url: options.url, model: model.layer, route: model.route })), Layer.provide(runner))
    )
  })

/**
 * Send one prompt through a client-only `Sharding` and stream its updates to `onUpdate`, followed
 * through a store of the same database (`Fleet.promptStream`); the answer.
 */
export const runPrompt = (options: {
  readonly url: string
  readonly sessionId: string
  readonly text: string
  readonly promptId: string | undefined
  readonly timeoutMs: number | undefined
  readonly onUpdate: (update: Fleet.PromptUpdate) => Effect.Effect<void>
}) =>
  Effect.gen(function*() {
    const promptId = options.promptId ?? (yield* nextId)
    let answer: Fleet.PromptAnswer | undefined
    yield* Fleet.promptStream(
      options.sessionId,
      new Fleet.PromptRequest({ promptId, text: options.text }),
      options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }
    ).pipe(
      Stream.runForEach((update) => {
        if (update._tag === "Answered") answer = update.answer
        return options.onUpdate(update)
      })
    )
    // the stream ends with its answer (or fails)
    return answer!
  }).pipe(
    // not read-only: on a database no runner has used yet, the store's schema is created (as a runner would)
    Effect.provide(Layer.merge(layerClient({ url: options.url }), PostgresStore.layer({ url: options.url })))
  )
