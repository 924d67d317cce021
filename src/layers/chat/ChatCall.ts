/**
 * One recorded `@effect/ai` chat call (docs/chat.md): the turn it opens, the compaction hook, the
 * new messages and the request header written and flushed before the model is called (the
 * checkpoint), the response recorded as chunks and messages, and the turn closed however the call
 * ends. Internal to the chat layer: `ChatPersistence` runs every `generateText`, `generateObject`
 * and `streamText` through `call`.
 *
 * @since 0.2.0
 */
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Ref from "effect/Ref"
import type { Event } from "../../schema/Events.js"
import type { RequestHeader } from "../../schema/RequestHeader.js"
import type { HeaderSnapshotterShape } from "../../services/HeaderSnapshotter.js"
import { ChunkTranslator, ModelRequestConfig, toolSpecs } from "../../services/PromptConversion.js"
import type { SessionShape } from "../../services/Session.js"
import {
  asStreamParts,
  backing,
  type ChatSource,
  type Entry,
  failureReason,
  historyOf,
  messageIdFor,
  retract,
  stamp,
  syncHistory,
  usageOfParts,
  writeMessages
} from "./ChatRecording.js"

/**
 * What a persisted chat remembers between calls.
 *
 * @since 0.2.0
 * @category models
 */
export interface ChatState {
  firstOfInstance: boolean
  /** The history last set from the log: a different value in the Ref is an edit by the user. */
  synced: Prompt.Prompt
}

/**
 * A toolkit with its handlers, as a chat call takes it.
 *
 * @since 0.2.0
 * @category models
 */
export type AnyToolkit = Toolkit.WithHandler<Record<string, Tool.Any>>

/**
 * What every call of one `Chat.Persistence` service shares.
 *
 * @since 0.2.0
 * @category models
 */
export interface CallEnv {
  readonly source: ChatSource
  /** The route's context window, recorded in `request/context` and given to the compaction hook. */
  readonly contextWindow: number | undefined
  readonly snapshotter: HeaderSnapshotterShape
  /** The compaction option with its requirements provided, run with the chat's session (its failures are defects). */
  readonly compact:
    | ((
      context: { readonly turn: number; readonly header: RequestHeader | undefined; readonly contextWindow: number | undefined },
      session: SessionShape
    ) => Effect.Effect<void>)
    | undefined
  /** Drops the chat's open handle: the next use opens the session again. */
  readonly invalidate: (chatId: string) => Effect.Effect<void>
}

/**
 * A failure of the store as the defect of a call (whose error channel is the caller's).
 *
 * @since 0.2.0
 * @category utils
 */
export const die = (method: string) => (e: unknown) => Effect.die(backing(method)(e))

/**
 * One recorded call: open the turn, compaction, write the new messages and the header, flush
 * (checkpoint), run the model, record its response and close the turn; flush before returning.
 *
 * @since 0.2.0
 * @category utils
 */
export const call = <A, E, R2>(
  env: CallEnv,
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
) => {
  const { source } = env
  const { model, provider } = source
  return Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const { session } = entry
      // a store failure ends the call as a defect and drops the handle: the next use reopens
      const failStore = (e: unknown) => Effect.zipRight(env.invalidate(chatId), die(method)(e))
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
        if (env.compact !== undefined) {
          yield* env.compact({
            turn,
            header: yield* session.requestHeader,
            contextWindow: env.contextWindow
          }, session)
        }
        yield* session.append("step/start", { turn, step }).pipe(Effect.catchAll(failStore))
        // a history set or edited outside a call is recorded first, as @effect/ai's chat sends it
        const edited = current === state.synced
          ? Prompt.empty
          : yield* syncHistory(source, entry, turn, step, current).pipe(Effect.catchAll(failStore))
        // @effect/ai stamps the call's new messages with the id of the history's last assistant message
        const messageId = yield* messageIdFor(current)
        yield* writeMessages(source, session, turn, step, edited, undefined).pipe(Effect.catchAll(failStore))
        const written = yield* writeMessages(source, session, turn, step, stamp(Prompt.make(input), messageId), undefined).pipe(
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
        yield* env.snapshotter.record(session, {
          header,
          context: { provider, model, ...(env.contextWindow === undefined ? {} : { contextWindow: env.contextWindow }) },
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
        yield* writeMessages(source, session, turn, step, stamp(responsePrompt, messageId), {
          chunkSeqs,
          usage: usageOfParts(parts),
          interrupted: !completed
        }).pipe(Effect.catchAll(failStore))
      } else if (!completed && !streamed && written.length > 0) {
        // @effect/ai's chat keeps no trace of a failed call: its prompt messages are shadowed
        // by a recorded replace (they stay in the log and in the transcript)
        yield* retract(source, session, turn, step, written).pipe(Effect.catchAll(failStore))
      }
      yield* closeWith(Exit.isSuccess(exit) ? { kind: "completed" } : failureReason(exit.cause))
      return yield* exit
    })
  ).pipe(Effect.withSpan(`ChatPersistence.${method}`, { captureStackTrace: false, attributes: { chatId } }))
}
