/**
 * `@effect/ai`'s `Chat.Persistence` on the session log: a chat id is a session id, the chat's
 * history is the session's derived messages as a `Prompt`, and every `generateText`, `streamText`
 * and `generateObject` call is recorded as a turn (prompt messages, request header, streamed
 * chunks, assistant message, tool calls and results, closers), batched with checkpoints. Runs on
 * any `SessionStore`; store failures surface as `PersistenceBackingError` with our tagged error as
 * the cause. See docs/chat.md.
 *
 * @example
 * ```ts
 * import * as Chat from "@effect/ai/Chat"
 * import * as Effect from "effect/Effect"
 * import * as Layer from "effect/Layer"
 * import { ChatPersistence, SqliteStore } from "effect-session-log"
 *
 * // where @effect/ai's own persisted chat takes Chat.layerPersisted({ storeId: "chats" })
 * const ChatLive = ChatPersistence.layer().pipe(Layer.provide(SqliteStore.layer({ filename: "chats.db" })))
 *
 * const program = Effect.gen(function*() {
 *   const persistence = yield* Chat.Persistence
 *   const chat = yield* persistence.getOrCreate("support-42")
 *   // chat.generateText({ prompt: "Hello" }) records a turn; it needs a LanguageModel
 *   return chat.id
 * })
 * export const main = program.pipe(Effect.provide(ChatLive))
 * ```
 *
 * @since 0.2.0
 */
import * as AiError from "@effect/ai/AiError"
import * as Chat from "@effect/ai/Chat"
import * as AiIdGenerator from "@effect/ai/IdGenerator"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import { PersistenceBackingError } from "@effect/experimental/Persistence"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as RcMap from "effect/RcMap"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { SessionExists, SessionNotFound } from "../../schema/Errors.js"
import type { Event, SurfaceOp } from "../../schema/Events.js"
import { SESSION_FORMAT_VERSION } from "../../schema/Format.js"
import type { Message, TokenUsage } from "../../schema/Messages.js"
import type { RequestHeader } from "../../schema/RequestHeader.js"
import { HeaderSnapshotter, type HeaderSnapshotterShape } from "../../services/HeaderSnapshotter.js"
import { nextId } from "../../services/IdGenerator.js"
import { aiErrorFailure, ChunkTranslator, ModelRequestConfig, toolSpecs, usageOf } from "../../services/PromptConversion.js"
import { Session, type SessionShape } from "../../services/Session.js"
import type { SessionStore } from "../../services/SessionStore.js"
import { deriveEventMessage } from "../../services/SurfaceManager.js"
import * as HeaderSnapshotterLive from "../session/HeaderSnapshotterLive.js"
import * as SessionLive from "../session/SessionLive.js"
import { messagesToPrompt, planMessage, PromptFold } from "./ChatPrompt.js"

/**
 * What the compaction option receives before each call: the turn and the latest request header.
 * `Compact.preStepHook(policy)` has this shape.
 *
 * @since 0.2.0
 * @category models
 */
export interface CompactionContext {
  readonly turn: number
  readonly header: RequestHeader | undefined
  readonly contextWindow?: number | undefined
}

/**
 * Options of `layer` (and `make`).
 *
 * @since 0.2.0
 * @category models
 */
export interface ChatPersistenceOptions<R = never> {
  /** The provider recorded in request headers and assistant messages (default `"unknown"`). */
  readonly provider?: string | undefined
  /** The model recorded in request headers and assistant messages (default `"unknown"`). */
  readonly model?: string | undefined
  /** The route's context window, recorded in `request/context` and given to the compaction hook. */
  readonly contextWindow?: number | undefined
  /** How appends reach the store (default: batched, flushed at every checkpoint and before a call returns). */
  readonly persistence?: SessionLive.PersistenceOptions | undefined
  /** How long an unused chat's session handle stays open (default 1 minute); it reopens on the next use. */
  readonly idleTimeToLive?: Duration.DurationInput | undefined
  /** Runs in the open turn before the call's messages are written, with the chat's `Session` (e.g. `Compact.preStepHook(policy)`). */
  readonly compaction?: ((context: CompactionContext) => Effect.Effect<void, unknown, R>) | undefined
}

/** What a persisted chat remembers between calls. */
interface ChatState {
  firstOfInstance: boolean
  /** The history last set from the log: a different value in the Ref is an edit by the user. */
  synced: Prompt.Prompt
}

/** One open chat session and the lock its calls take. */
interface Entry {
  readonly session: SessionShape
  readonly lock: Effect.Semaphore
  /** The session's history as a Prompt, converted incrementally. */
  readonly fold: PromptFold
}

type AnyToolkit = Toolkit.WithHandler<Record<string, Tool.Any>>

/** A store failure as `@effect/experimental`'s backing error, our tagged error as the cause. */
const backing = (method: string) => (cause: unknown): PersistenceBackingError =>
  PersistenceBackingError.make(`ChatPersistence.${method}`, cause)

const encodeMessage = Schema.encodeSync(Prompt.Message)

const sameMessage = (a: Prompt.Message, b: Prompt.Message): boolean =>
  JSON.stringify(encodeMessage(a)) === JSON.stringify(encodeMessage(b))

/** What a response looks like as stream parts, so a non-streamed call is recorded as chunks too. */
const asStreamParts = (part: Response.AnyPart, n: number): ReadonlyArray<Response.AnyPart> => {
  switch (part.type) {
    case "text":
    case "reasoning": {
      const id = `${part.type}-${n}`
      return [
        { type: `${part.type}-start`, id },
        { type: `${part.type}-delta`, id, delta: part.text },
        { type: `${part.type}-end`, id }
      ] as unknown as ReadonlyArray<Response.AnyPart>
    }
    default:
      return [part]
  }
}

/** The usage of the finish part among the response parts, if any. */
const usageOfParts = (parts: ReadonlyArray<Response.AnyPart>): TokenUsage | undefined => {
  for (const part of parts) if (part.type === "finish") return usageOf(part.usage)
  return undefined
}

/** The `turn/end` reason of a call that did not complete. */
const failureReason = (cause: Cause.Cause<unknown>): Record<string, unknown> => {
  if (Cause.isInterruptedOnly(cause)) return { kind: "aborted", reason: { kind: "user" } }
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure) && AiError.isAiError(failure.value)) {
    return { kind: "error", error: aiErrorFailure(failure.value) }
  }
  return { kind: "error", error: { message: Cause.pretty(cause), code: "UNKNOWN" } }
}

/**
 * Make the `Chat.Persistence` service over the `SessionStore` in context.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = <R = never>(
  options: ChatPersistenceOptions<R> = {}
): Effect.Effect<Chat.Persistence.Service, never, SessionStore | Scope.Scope | Exclude<R, Session>> =>
  Effect.gen(function*() {
    const provider = options.provider ?? "unknown"
    const model = options.model ?? "unknown"
    const persistence = options.persistence ?? { mode: "batched" as const }
    const context = yield* Effect.context<SessionStore | Exclude<R, Session>>()
    const snapshotter: HeaderSnapshotterShape = Option.getOrElse(
      yield* Effect.serviceOption(HeaderSnapshotter),
      () => HeaderSnapshotterLive.make()
    )
    const entries = yield* RcMap.make({
      lookup: (chatId: string) =>
        Effect.gen(function*() {
          const session = yield* SessionLive.open(chatId, { persistence })
          yield* Effect.addFinalizer(() => Effect.ignore(session.close))
          return { session, lock: yield* Effect.makeSemaphore(1), fold: new PromptFold() } satisfies Entry
        }).pipe(Effect.provide(context)),
      idleTimeToLive: options.idleTimeToLive ?? "1 minute"
    })

    const die = (method: string) => (e: unknown) => Effect.die(backing(method)(e))

    /** Run `f` on the chat's open session, under its lock (a failure to open is a backing error). */
    const withEntry = <A, E, R2>(chatId: string, method: string, f: (entry: Entry) => Effect.Effect<A, E, R2>) =>
      Effect.scoped(Effect.flatMap(
        RcMap.get(entries, chatId).pipe(Effect.mapError(backing(method))),
        (entry) => entry.lock.withPermits(1)(f(entry))
      ))

    /** The same for a model call, whose error channel is the caller's: a failure to open is a defect. */
    const withCallEntry = <A, E, R2>(chatId: string, method: string, f: (entry: Entry) => Effect.Effect<A, E, R2>) =>
      Effect.scoped(Effect.flatMap(
        RcMap.get(entries, chatId).pipe(Effect.catchAll(die(method))),
        (entry) => entry.lock.withPermits(1)(f(entry))
      ))

    /** The messages of one Prompt message written as events of the turn's step. */
    const writeMessages = (
      session: SessionShape,
      turn: number,
      step: number,
      prompt: Prompt.Prompt,
      response: {
        readonly chunkSeqs: ReadonlyArray<number>
        readonly usage: TokenUsage | undefined
        readonly interrupted: boolean
      } | undefined
    ) =>
      Effect.gen(function*() {
        const written: Array<number> = []
        for (const message of prompt.content) {
          for (const planned of planMessage(message)) {
            const id = yield* nextId
            const mark = planned.prompt === undefined ? {} : { prompt: planned.prompt }
            if (planned.role === "assistant") {
              if (planned.content.length === 0) continue
              const event = yield* session.append("assistant/message", {
                turn,
                step,
                message: { id, role: "assistant", content: planned.content, source: { kind: "model", provider, model }, ...mark },
                ...(response?.usage === undefined ? {} : { usage: response.usage }),
                ...(response?.interrupted === true ? { interrupted: true } : {})
              } as never, {
                surfaceOp: "append",
                ...(response === undefined ? {} : { sourceEventSeqs: response.chunkSeqs })
              })
              written.push(event.seq)
            } else if (planned.callId !== undefined) {
              const block = planned.content[0]
              let cites: ReadonlyArray<number> | undefined
              if (response !== undefined) {
                // a tool the call ran: its tool/call, then its result citing it
                const call = yield* session.append("tool/call", {
                  turn,
                  step,
                  callId: planned.callId,
                  name: typeof block.name === "string" ? block.name : "unknown",
                  arguments: callArguments(prompt, planned.callId)
                })
                cites = [call.seq]
              }
              const event = yield* session.append("tool/result", {
                turn,
                step,
                message: {
                  id,
                  role: "user",
                  content: planned.content,
                  source: { kind: "tool", callId: planned.callId },
                  ...mark
                },
                ...(block.isError === true ? { error: { name: "ToolFailure", code: "TOOL_FAILED" } } : {})
              } as never, { surfaceOp: "append", ...(cites === undefined ? {} : { sourceEventSeqs: cites }) })
              written.push(event.seq)
            } else {
              const event = yield* session.append("user/message", {
                id,
                role: "user",
                content: planned.content,
                source: planned.system === true ? { kind: "plugin", plugin: "chat", form: "instructions" } : { kind: "user" },
                ...mark
              } as never, { surfaceOp: "append" })
              written.push(event.seq)
            }
          }
        }
        return written
      })

    /** The raw arguments of a call of the response's assistant message (tool/call records them). */
    const callArguments = (prompt: Prompt.Prompt, callId: string): string => {
      for (const m of prompt.content) {
        if (m.role !== "assistant") continue
        for (const part of m.content) {
          if (part.type === "tool-call" && part.id === callId) return JSON.stringify(part.params ?? null)
        }
      }
      return "null"
    }

    const historyOf = (entry: Entry) => Effect.map(entry.session.messages, (messages) => entry.fold.of(messages))

    /** `@effect/ai`'s message identity: the previous assistant message's id, else a new one. */
    const messageIdFor = (history: Prompt.Prompt) =>
      Effect.gen(function*() {
        const last = history.content[history.content.length - 1]
        if (last !== undefined && last.role === "assistant") {
          const id = (last.options[Chat.Persistence.key] as { messageId?: unknown } | undefined)?.messageId
          if (typeof id === "string") return id
        }
        const generator = Option.getOrElse(
          yield* Effect.serviceOption(AiIdGenerator.IdGenerator),
          () => AiIdGenerator.defaultIdGenerator
        )
        return yield* generator.generateId()
      })

    const stamp = (prompt: Prompt.Prompt, messageId: string): Prompt.Prompt =>
      Prompt.fromMessages(prompt.content.map((m) =>
        Prompt.makeMessage(m.role as "user", {
          content: m.content as never,
          options: { ...m.options, [Chat.Persistence.key]: { messageId } }
        })
      ))

    /**
     * One recorded call: open the turn, compaction, write the new messages and the header, flush
     * (checkpoint), run the model, record its response and close the turn; flush before returning.
     */
    const call = <A, E, R2>(
      chatId: string,
      entry: Entry,
      historyRef: Ref.Ref<Prompt.Prompt>,
      state: ChatState,
      method: string,
      input: Prompt.RawInput,
      toolkitInput: AnyToolkit | Effect.Effect<AnyToolkit, any, any> | undefined,
      run: (
        prompt: Prompt.Prompt,
        toolkit: AnyToolkit | undefined,
        record: (part: Response.AnyPart) => Effect.Effect<void>
      ) => Effect.Effect<A, E, R2>,
      partsOf: (a: A) => ReadonlyArray<Response.AnyPart>,
      streamed: boolean
    ) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const { session } = entry
          // a store failure ends the call as a defect and drops the handle: the next use reopens
          const failStore = (e: unknown) => Effect.zipRight(RcMap.invalidate(entries, chatId), die(method)(e))
          const turn = (yield* session.counts).turnStarts + 1
          const step = 1
          yield* session.append("turn/start", { turn }).pipe(Effect.catchAll(failStore))
          const current = yield* Ref.get(historyRef)
          const closeWith = (reason: Record<string, unknown>) =>
            Effect.gen(function*() {
              yield* session.append("step/end", { turn, step })
              yield* session.append("turn/end", { turn, reason: reason as never })
              yield* session.flush
              state.synced = yield* historyOf(entry)
              yield* Ref.set(historyRef, state.synced)
            }).pipe(Effect.catchAll(failStore))
          const prepared = yield* Effect.exit(restore(Effect.gen(function*() {
            if (options.compaction !== undefined) {
              yield* options.compaction({
                turn,
                header: yield* session.requestHeader,
                contextWindow: options.contextWindow
              }).pipe(Effect.provide(context), Effect.provideService(Session, session), Effect.catchAll(Effect.die))
            }
            yield* session.append("step/start", { turn, step }).pipe(Effect.catchAll(failStore))
            // a history set or edited outside a call is recorded first, as @effect/ai's chat sends it
            const edited = current === state.synced
              ? Prompt.empty
              : yield* syncHistory(entry, turn, step, current).pipe(Effect.catchAll(failStore))
            // @effect/ai stamps the call's new messages with the id of the history's last assistant message
            const messageId = yield* messageIdFor(current)
            yield* writeMessages(session, turn, step, edited, undefined).pipe(Effect.catchAll(failStore))
            const written = yield* writeMessages(session, turn, step, stamp(Prompt.make(input), messageId), undefined).pipe(
              Effect.catchAll(failStore)
            )
            const toolkit = toolkitInput === undefined
              ? undefined
              : Effect.isEffect(toolkitInput)
              ? yield* (toolkitInput as Effect.Effect<AnyToolkit>)
              : toolkitInput
            const header: RequestHeader = {
              config: { provider, model },
              ...(toolkit === undefined || Object.keys(toolkit.tools).length === 0
                ? {}
                : { tools: toolSpecs(toolkit.tools) })
            }
            yield* snapshotter.record(session, {
              header,
              context: { provider, model, ...(options.contextWindow === undefined ? {} : { contextWindow: options.contextWindow }) },
              firstOfInstance: state.firstOfInstance
            }).pipe(Effect.catchAll(failStore))
            state.firstOfInstance = false
            // the prompt is the log's history as it stands now: exactly what `request --at` rebuilds
            const prompt = yield* historyOf(entry)
            // checkpoint: what the model will be sent is durable before it is called
            yield* session.flush.pipe(Effect.catchAll(failStore))
            return { prompt, toolkit, messageId, written }
          })))
          if (Exit.isFailure(prepared)) {
            yield* closeWith(failureReason(prepared.cause))
            return yield* Effect.failCause(Cause.map(prepared.cause, (e) => e as E))
          }
          const { messageId, prompt, toolkit, written } = prepared.value
          const translator = new ChunkTranslator()
          const chunkSeqs: Array<number> = []
          const parts: Array<Response.AnyPart> = []
          const record = (part: Response.AnyPart) =>
            Effect.gen(function*() {
              parts.push(part)
              const pieces = streamed ? [part] : asStreamParts(part, parts.length)
              for (const piece of pieces) {
                for (const chunk of translator.translate(piece as never)) {
                  const event: Event = yield* session.append("assistant/chunk", { turn, step, chunk: chunk as never })
                  chunkSeqs.push(event.seq)
                }
              }
            }).pipe(Effect.catchAll(failStore))
          const exit = yield* Effect.exit(restore(
            run(prompt, toolkit, record).pipe(
              Effect.provideService(ModelRequestConfig, { provider, model })
            )
          ))
          if (!streamed && Exit.isSuccess(exit)) {
            for (const part of partsOf(exit.value)) yield* record(part)
          }
          const completed = Exit.isSuccess(exit)
          const responsePrompt = streamed || completed ? Prompt.fromResponseParts(parts) : Prompt.empty
          if (responsePrompt.content.length > 0) {
            yield* writeMessages(session, turn, step, stamp(responsePrompt, messageId), {
              chunkSeqs,
              usage: usageOfParts(parts),
              interrupted: !completed
            }).pipe(Effect.catchAll(failStore))
          } else if (!completed && !streamed && written.length > 0) {
            // @effect/ai's chat keeps no trace of a failed call: its prompt messages are shadowed
            // by a recorded replace (they stay in the log and in the transcript)
            yield* retract(session, turn, step, written).pipe(Effect.catchAll(failStore))
          }
          yield* closeWith(Exit.isSuccess(exit) ? { kind: "completed" } : failureReason(exit.cause))
          return yield* exit
        })
      ).pipe(Effect.withSpan(`ChatPersistence.${method}`, { captureStackTrace: false, attributes: { chatId } }))

    /**
     * Record a history set or edited outside a call (`Ref.set` / `Ref.update` on `history`), as
     * `@effect/ai`'s chat would send and save it: the messages after the longest common prefix of
     * the log's history and `current` are shadowed by one recorded replace (they stay in the log),
     * and the returned messages of `current` after that prefix are to be written next.
     */
    const syncHistory = (entry: Entry, turn: number, step: number, current: Prompt.Prompt) =>
      Effect.gen(function*() {
        const { session } = entry
        const logged = yield* historyOf(entry)
        let common = 0
        while (
          common < logged.content.length && common < current.content.length &&
          sameMessage(logged.content[common], current.content[common])
        ) common++
        if (common < logged.content.length) {
          // the first surface node that contributes to message `common` and every node after it
          const nodes = yield* session.surface.nodes
          const events = yield* session.events
          const messages: Array<Message> = []
          const fold = new PromptFold()
          let first = nodes.length
          for (let i = 0; i < nodes.length; i++) {
            const m = deriveEventMessage(events[nodes[i]])
            if (m !== undefined) messages.push(m)
            if (fold.of(messages).content.length > common) {
              first = i
              break
            }
          }
          const shadowed = nodes.slice(first)
          if (shadowed.length > 0) yield* retract(session, turn, step, shadowed)
        }
        return Prompt.fromMessages(current.content.slice(common))
      })

    /** Shadow surface nodes by a recorded replace whose message projects to nothing (empty content). */
    const retract = (session: SessionShape, turn: number, step: number, shadowed: ReadonlyArray<number>) =>
      Effect.gen(function*() {
        const id = yield* nextId
        const op: SurfaceOp = { op: "replace", start: shadowed[0], end: shadowed[shadowed.length - 1] }
        yield* session.append("assistant/message", {
          turn,
          step,
          message: { id, role: "assistant", content: [], source: { kind: "model", provider, model } }
        }, { surfaceOp: op, sourceEventSeqs: shadowed })
      })

    const toPersisted = (chatId: string) =>
      Effect.gen(function*() {
        const history = yield* withEntry(chatId, "get", (entry) => historyOf(entry))
        const historyRef = yield* Ref.make(history)
        const state: ChatState = { firstOfInstance: true, synced: history }
        const encode = Schema.encode(Prompt.Prompt)
        const encodeJson = Schema.encode(Prompt.FromJson)
        const exported = <A>(f: (p: Prompt.Prompt) => Effect.Effect<A, unknown>, method: string) =>
          Ref.get(historyRef).pipe(
            Effect.flatMap(f),
            Effect.mapError((error) =>
              new AiError.MalformedOutput({
                module: "ChatPersistence",
                method,
                description: `Failed to encode chat history: ${String(error)}`
              })
            )
          )
        const persisted: Chat.Persisted = {
          id: chatId,
          history: historyRef,
          export: exported(encode, "export"),
          exportJson: exported(encodeJson, "exportJson"),
          save: withEntry(chatId, "save", (entry) =>
            Effect.gen(function*() {
              const { session } = entry
              const current = yield* Ref.get(historyRef)
              // like @effect/ai's save, which takes (and does not use) a message id here
              yield* messageIdFor(current)
              if (current !== state.synced) {
                // the edit is recorded as a turn without a model call
                const turn = (yield* session.counts).turnStarts + 1
                yield* session.append("turn/start", { turn })
                yield* session.append("step/start", { turn, step: 1 })
                const edited = yield* syncHistory(entry, turn, 1, current)
                yield* writeMessages(session, turn, 1, edited, undefined)
                yield* session.append("step/end", { turn, step: 1 })
                yield* session.append("turn/end", { turn, reason: { kind: "completed" } })
              }
              yield* session.flush
              state.synced = yield* historyOf(entry)
              yield* Ref.set(historyRef, state.synced)
            })
          ).pipe(Effect.mapError(backing("save")), Effect.withSpan("ChatPersistence.save")),
          generateText: (callOptions: any) =>
            withCallEntry(chatId, "generateText", (entry) =>
              call(chatId, entry, historyRef, state, "generateText", callOptions.prompt, callOptions.toolkit, (prompt, toolkit) =>
                LanguageModel.generateText({
                  ...callOptions,
                  prompt,
                  ...(toolkit === undefined ? {} : { toolkit })
                }), (response: LanguageModel.GenerateTextResponse<any>) => response.content, false)
            ) as never,
          generateObject: (callOptions: any) =>
            withCallEntry(chatId, "generateObject", (entry) =>
              call(chatId, entry, historyRef, state, "generateObject", callOptions.prompt, callOptions.toolkit, (prompt, toolkit) =>
                LanguageModel.generateObject({
                  ...callOptions,
                  prompt,
                  ...(toolkit === undefined ? {} : { toolkit })
                }), (response: LanguageModel.GenerateObjectResponse<any, unknown>) => response.content, false)
            ) as never,
          streamText: (callOptions: any) =>
            Stream.unwrapScoped(Effect.gen(function*() {
              const entry = yield* RcMap.get(entries, chatId).pipe(Effect.catchAll(die("streamText")))
              yield* Effect.acquireRelease(entry.lock.take(1), () => entry.lock.release(1))
              // the stream's parts reach the caller through a queue while the call records them
              return Stream.asyncScoped<Response.AnyPart, unknown, any>((emit) =>
                call(chatId, entry, historyRef, state, "streamText", callOptions.prompt, callOptions.toolkit, (prompt, toolkit, record) =>
                  LanguageModel.streamText({
                    ...callOptions,
                    prompt,
                    ...(toolkit === undefined ? {} : { toolkit })
                  }).pipe(
                    Stream.runForEach((part) =>
                      Effect.zipRight(record(part as Response.AnyPart), Effect.promise(() => emit.single(part as Response.AnyPart)))
                    )
                  ), () => [], true).pipe(
                    Effect.matchCauseEffect({
                      onFailure: (cause) => Effect.promise(() => emit.halt(cause)),
                      onSuccess: () => Effect.promise(() => emit.end())
                    }),
                    Effect.forkScoped
                  )
              )
            })) as never
        }
        return persisted
      })

    const exists = (chatId: string) =>
      Effect.gen(function*() {
        const result = yield* Effect.scoped(RcMap.get(entries, chatId)).pipe(
          Effect.as(true),
          // a failed open is not kept: the next use of the id opens again
          Effect.tapError(() => RcMap.invalidate(entries, chatId)),
          Effect.catchIf((e) => e instanceof SessionNotFound, () => Effect.succeed(false))
        )
        return result
      })

    const get = Effect.fn("ChatPersistence.get")(function*(chatId: string, _options?: {
      readonly timeToLive?: Duration.DurationInput | undefined
    }) {
      if (!(yield* exists(chatId).pipe(Effect.mapError(backing("get"))))) {
        return yield* new Chat.ChatNotFoundError({ chatId })
      }
      return yield* toPersisted(chatId).pipe(Effect.mapError(backing("get")))
    })

    const getOrCreate = Effect.fn("ChatPersistence.getOrCreate")(function*(chatId: string, _options?: {
      readonly timeToLive?: Duration.DurationInput | undefined
    }) {
      if (!(yield* exists(chatId).pipe(Effect.mapError(backing("getOrCreate"))))) {
        // the new session is written at once (header and end-seed marker), so `get` finds it
        const createdAt = yield* Clock.currentTimeMillis
        yield* Effect.scoped(SessionLive.fromSeed({
          header: { version: SESSION_FORMAT_VERSION, id: chatId, createdAt },
          seed: []
        })).pipe(
          Effect.provide(context),
          Effect.catchIf((e) => e instanceof SessionExists, () => Effect.void),
          Effect.mapError(backing("getOrCreate"))
        )
      }
      return yield* toPersisted(chatId).pipe(Effect.mapError(backing("getOrCreate")))
    })

    return Chat.Persistence.of({ get, getOrCreate })
  })

/**
 * A layer providing `@effect/ai`'s `Chat.Persistence` over the `SessionStore` in context: the
 * one-line swap for `Chat.layerPersisted({ storeId })`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = <R = never>(
  options: ChatPersistenceOptions<R> = {}
): Layer.Layer<Chat.Persistence, never, SessionStore | Exclude<R, Session>> =>
  Layer.scoped(Chat.Persistence, make(options))

/**
 * The Prompt of a list of derived messages (the chat's history, or the messages `request --at`
 * rebuilds): the exact inverse of what a chat records.
 *
 * @since 0.2.0
 * @category utils
 */
export const promptOf = (messages: ReadonlyArray<Message>): Prompt.Prompt => messagesToPrompt(messages)

