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
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as RcMap from "effect/RcMap"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { SessionExists, SessionNotFound } from "../../schema/Errors.js"
import { SESSION_FORMAT_VERSION } from "../../schema/Format.js"
import type { Message } from "../../schema/Messages.js"
import type { RequestHeader } from "../../schema/RequestHeader.js"
import { HeaderSnapshotter, type HeaderSnapshotterShape } from "../../services/HeaderSnapshotter.js"
import { Session } from "../../services/Session.js"
import type { SessionStore } from "../../services/SessionStore.js"
import * as HeaderSnapshotterLive from "../session/HeaderSnapshotterLive.js"
import * as SessionLive from "../session/SessionLive.js"
import { call, type CallEnv, type ChatState, die } from "./ChatCall.js"
import { messagesToPrompt, PromptFold } from "./ChatPrompt.js"
import { backing, type ChatSource, type Entry, historyOf, messageIdFor, syncHistory, writeMessages } from "./ChatRecording.js"

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
    const source: ChatSource = { provider: options.provider ?? "unknown", model: options.model ?? "unknown" }
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
    const compaction = options.compaction
    const env: CallEnv = {
      source,
      contextWindow: options.contextWindow,
      snapshotter,
      compact: compaction === undefined ? undefined : (hookContext, session) =>
        // the context provides every requirement of the hook but the chat's Session
        (compaction(hookContext).pipe(
          Effect.provide(context),
          Effect.provideService(Session, session),
          Effect.catchAll(Effect.die)
        ) as Effect.Effect<void>),
      invalidate: (chatId) => RcMap.invalidate(entries, chatId)
    }

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
        /** A call answered whole (`generateText`, `generateObject`): its response's parts recorded as chunks after it. */
        const generated = (
          method: string,
          callOptions: any,
          generate: (options: any) => Effect.Effect<{ readonly content: ReadonlyArray<Response.AnyPart> }, any, any>
        ) =>
          withCallEntry(chatId, method, (entry) =>
            call(env, chatId, entry, historyRef, state, method, callOptions.prompt, callOptions.toolkit, (prompt, toolkit) =>
              generate({
                ...callOptions,
                prompt,
                ...(toolkit === undefined ? {} : { toolkit })
              }), (response) => response.content, false))
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
                const edited = yield* syncHistory(source, entry, turn, 1, current)
                yield* writeMessages(source, session, turn, 1, edited, undefined)
                yield* session.append("step/end", { turn, step: 1 })
                yield* session.append("turn/end", { turn, reason: { kind: "completed" } })
              }
              yield* session.flush
              state.synced = yield* historyOf(entry)
              yield* Ref.set(historyRef, state.synced)
            })
          ).pipe(Effect.mapError(backing("save")), Effect.withSpan("ChatPersistence.save")),
          generateText: (callOptions: any) => generated("generateText", callOptions, LanguageModel.generateText) as never,
          generateObject: (callOptions: any) => generated("generateObject", callOptions, LanguageModel.generateObject) as never,
          streamText: (callOptions: any) =>
            Stream.unwrapScoped(Effect.gen(function*() {
              const entry = yield* RcMap.get(entries, chatId).pipe(Effect.catchAll(die("streamText")))
              yield* Effect.acquireRelease(entry.lock.take(1), () => entry.lock.release(1))
              // the stream's parts reach the caller through a queue while the call records them
              return Stream.asyncScoped<Response.AnyPart, unknown, any>((emit) =>
                call(env, chatId, entry, historyRef, state, "streamText", callOptions.prompt, callOptions.toolkit, (prompt, toolkit, record) =>
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

