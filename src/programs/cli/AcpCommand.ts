/**
 * `session-log acp --store <store>`: the ACP agent for editors (Zed and other Agent Client
 * Protocol clients) over stdio, on any store. The model is the keyless scripted one (each request
 * gets a script derived from the prompt: "list" lists the working directory, "echo <text>" calls a
 * tool that needs permission, anything else is echoed), so a person can try it without a key, or
 * the LanguageModel layer a module given with `--model` exports.
 * stdout carries only protocol frames; logs go to stderr.
 */
import * as Command from "@effect/cli/Command"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { pathToFileURL } from "node:url"
import * as HeaderSnapshotterLive from "../../layers/session/HeaderSnapshotterLive.js"
import { type CallScript, make as makeScriptedLanguageModel } from "../../layers/model/ScriptedLanguageModel.js"
import * as SessionLive from "../../layers/session/SessionLive.js"
import { nextId } from "../../services/IdGenerator.js"
import { Session } from "../../services/Session.js"
import { SessionStore } from "../../services/SessionStore.js"
import { resolveSpec, runCommand, store } from "./CommandSupport.js"
import { openStore, type StoreSpec, UsageError } from "./Target.js"
import { makeWriteOnDemandStore } from "./WriteOnDemandStore.js"

const ListFiles = Tool.make("list_files", {
  description: "List the entries of the agent's working directory",
  success: Schema.Array(Schema.String)
})

const Echo = Tool.make("echo", {
  description: "Repeat a text back (asks the user's permission first)",
  parameters: { text: Schema.String },
  success: Schema.String
})

const toolkit = Toolkit.make(ListFiles, Echo)

// the tools act on the working directory of the session they run in (its header's cwd, which
// ACP requires at session/new), not on the agent process's
const handlers = toolkit.toLayer(Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  return {
    list_files: () =>
      Effect.serviceOption(Session).pipe(
        Effect.flatMap((session) =>
          Option.isSome(session) && session.value.header.cwd !== undefined
            ? fs.readDirectory(session.value.header.cwd)
            : Effect.succeed<ReadonlyArray<string>>([])
        ),
        Effect.map((names) => [...names].sort()),
        Effect.orElseSucceed(() => [])
      ),
    echo: ({ text }) => Effect.succeed(text)
  }
}))

const lastUserText = (prompt: Prompt.Prompt): string => {
  const last = prompt.content[prompt.content.length - 1]
  if (last === undefined || last.role !== "user") return ""
  return last.content.flatMap((p) => p.type === "text" ? [p.text] : []).join("\n")
}

/**
 * The script of the next call, from the request: tool rounds, then an answer. `callId` names a
 * tool call: it must be unique in the session across processes (an editor keys its tool cards by
 * it, and a loaded session replays the earlier ones), so it comes from the `IdGenerator`.
 */
const scriptFor = (prompt: Prompt.Prompt, callId: string): CallScript => {
  const last = prompt.content[prompt.content.length - 1]
  if (last?.role === "tool") {
    return [{ type: "text", text: "Done: the tool result is above." }, { type: "finish", reason: "stop" }]
  }
  const text = lastUserText(prompt).trim()
  if (/^list\b/i.test(text)) {
    return [{ type: "tool-call", id: callId, name: "list_files", params: {} }, { type: "finish", reason: "tool-calls" }]
  }
  const echo = /^echo\s+([\s\S]+)$/i.exec(text)
  if (echo !== null) {
    return [{ type: "tool-call", id: callId, name: "echo", params: { text: echo[1] } }, { type: "finish", reason: "tool-calls" }]
  }
  return [
    { type: "reasoning", text: "The keyless scripted model answers with an echo. " },
    {
      type: "text",
      text: `You said: ${text}\n\n(This is session-log's keyless scripted model. Try "list" or "echo <text>".)`
    },
    { type: "finish", reason: "stop" }
  ]
}

/** The scripted model, fed one script per request. */
const keylessModel = Layer.effect(
  LanguageModel.LanguageModel,
  Effect.gen(function*() {
    const { handle, model } = yield* makeScriptedLanguageModel({ scripts: [], requireConsumed: false })
    const feed = (options: { readonly prompt: Prompt.RawInput }) =>
      Effect.flatMap(nextId, (id) => handle.push(scriptFor(options.prompt as Prompt.Prompt, `call-${id}`)))
    return {
      ...model,
      streamText: (options) => Stream.unwrap(Effect.as(feed(options), model.streamText(options))),
      generateText: (options) => Effect.zipRight(feed(options), model.generateText(options))
    } as LanguageModel.Service
  })
)

const modelOption = Options.text("model").pipe(
  Options.optional,
  Options.withPseudoName("<module>"),
  Options.withDescription(
    "a JavaScript module whose `layer` export is a Layer providing an @effect/ai LanguageModel (its dependencies " +
      "provided) and whose optional `route` export ({ provider, model }) names it in request headers; default: the " +
      "keyless scripted model"
  )
)

/** The model of `--model <module>`: its `layer` and `route` exports (a usage error when it has none); `fleet runner` uses it too. */
export const modelModule = (module: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const url = pathToFileURL(path.resolve(module)).href
    const loaded = yield* Effect.tryPromise({
      try: () => import(url) as Promise<Record<string, unknown>>,
      catch: (e) => new UsageError({ detail: `--model ${module} could not be loaded: ${e instanceof Error ? e.message : String(e)}` })
    })
    if (!Layer.isLayer(loaded.layer)) {
      return yield* new UsageError({ detail: `--model ${module} has no \`layer\` export (a Layer providing LanguageModel)` })
    }
    const route = loaded.route as { readonly provider?: unknown; readonly model?: unknown } | undefined
    return {
      layer: loaded.layer as Layer.Layer<LanguageModel.LanguageModel>,
      route: typeof route?.provider === "string" && typeof route.model === "string"
        ? { provider: route.provider, model: route.model }
        : { provider: "custom", model: path.basename(module) }
    }
  })

/**
 * The store `acp` serves. A SQLite store is opened for writing only at the first write (an agent
 * that only lists, loads or registers sessions writes nothing, and creates no database): reads go
 * to a read-only open until then (`WriteOnDemandStore`).
 */
const acpStore = (spec: StoreSpec) =>
  Effect.gen(function*() {
    if (spec.kind !== "sqlite") return (yield* openStore(spec, { mustExist: false })).store
    const fs = yield* FileSystem.FileSystem
    const exists = yield* fs.exists(spec.filename).pipe(Effect.orElseSucceed(() => false))
    // a pristine (empty) database file holds no store: read as none, like a missing one
    const readOnly = exists ? (yield* openStore(spec, { mustExist: true, readOnly: true })).store : undefined
    const scope = yield* Effect.scope
    const context = yield* Effect.context<FileSystem.FileSystem | Path.Path>()
    const writable = openStore(spec, { mustExist: false }).pipe(
      Effect.flatMap(({ store: s }) =>
        s === undefined ? Effect.fail(new UsageError({ detail: `no store at ${spec.filename}` })) : Effect.succeed(s)
      ),
      Scope.extend(scope),
      Effect.provide(context)
    )
    return yield* makeWriteOnDemandStore(readOnly, writable)
  })

/** `acp`. */
export const acpCommand = Command.make("acp", { store, model: modelOption }, (o) =>
  runCommand(
    false,
    Effect.gen(function*() {
      const spec = yield* resolveSpec(o.store)
      const model = Option.isSome(o.model)
        ? yield* modelModule(o.model.value)
        : { layer: keylessModel, route: { provider: "scripted", model: "keyless" } }
      const opened = yield* acpStore(spec)
      if (opened === undefined) return
      // loaded here, not with the CLI: the ACP SDK and its schemas are a sixth of the bundle, and
      // every other command starts faster without them
      const { layerSessionFactory, serveStdio } = yield* Effect.promise(() => import("../acp/Acp.js"))
      const env = Layer.mergeAll(
        layerSessionFactory({ create: SessionLive.create, open: SessionLive.open }),
        model.layer,
        HeaderSnapshotterLive.layer,
        handlers
      ).pipe(Layer.provideMerge(Layer.succeed(SessionStore, opened)))
      yield* serveStdio({
        name: "session-log",
        toolkit,
        system: Option.isSome(o.model)
          ? "You are a coding agent with two tools: list_files (the working directory) and echo (needs permission)."
          : "You are the keyless demo agent of effect-session-log.",
        route: model.route,
        readOnlyTools: ["list_files"],
        gatedTools: ["echo"],
        presenter: (name, args) =>
          name === "list_files"
            ? { title: "List files", kind: "read" }
            : { title: `Echo ${JSON.stringify((args as { text?: unknown } | null)?.text ?? "")}`, kind: "other" }
      }).pipe(Effect.provide(env))
    }),
    () => Effect.void
  )).pipe(
    Command.withDescription(
      "run an ACP agent (for Zed and other editors) on stdio over --store, with the keyless scripted model or --model <module>"
    )
  )
