/**
 * How a chat's calls are written to its session (docs/chat.md): the messages of a Prompt as the
 * events of a turn's step, a replace that shadows messages `@effect/ai`'s chat dropped, a history
 * edited outside a call, `@effect/ai`'s message identity, and what a response or a failed call
 * becomes in the log. Internal to the chat layer: `ChatCall` and `ChatPersistence` use it.
 *
 * @since 0.2.0
 */
import * as AiError from "@effect/ai/AiError"
import * as Chat from "@effect/ai/Chat"
import * as AiIdGenerator from "@effect/ai/IdGenerator"
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import { PersistenceBackingError } from "@effect/experimental/Persistence"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { SurfaceOp } from "../../schema/Events.js"
import type { Message, TokenUsage } from "../../schema/Messages.js"
import { nextId } from "../../services/IdGenerator.js"
import { aiErrorFailure, usageOf } from "../../services/PromptConversion.js"
import type { SessionShape } from "../../services/Session.js"
import { deriveEventMessage } from "../../services/SurfaceManager.js"
import { planMessage, PromptFold } from "./ChatPrompt.js"

/**
 * The provider and model a chat records in request headers and assistant messages.
 *
 * @since 0.2.0
 * @category models
 */
export interface ChatSource {
  readonly provider: string
  readonly model: string
}

/**
 * One open chat session and the lock its calls take.
 *
 * @since 0.2.0
 * @category models
 */
export interface Entry {
  readonly session: SessionShape
  readonly lock: Effect.Semaphore
  /** The session's history as a Prompt, converted incrementally. */
  readonly fold: PromptFold
}

/**
 * A store failure as `@effect/experimental`'s backing error, our tagged error as the cause.
 *
 * @since 0.2.0
 * @category errors
 */
export const backing = (method: string) => (cause: unknown): PersistenceBackingError =>
  PersistenceBackingError.make(`ChatPersistence.${method}`, cause)

const encodeMessage = Schema.encodeSync(Prompt.Message)

const sameMessage = (a: Prompt.Message, b: Prompt.Message): boolean =>
  JSON.stringify(encodeMessage(a)) === JSON.stringify(encodeMessage(b))

/**
 * What a response looks like as stream parts, so a non-streamed call is recorded as chunks too.
 *
 * @since 0.2.0
 * @category utils
 */
export const asStreamParts = (part: Response.AnyPart, n: number): ReadonlyArray<Response.AnyPart> => {
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

/**
 * The usage of the finish part among the response parts, if any.
 *
 * @since 0.2.0
 * @category utils
 */
export const usageOfParts = (parts: ReadonlyArray<Response.AnyPart>): TokenUsage | undefined => {
  for (const part of parts) if (part.type === "finish") return usageOf(part.usage)
  return undefined
}

/**
 * The `turn/end` reason of a call that did not complete.
 *
 * @since 0.2.0
 * @category utils
 */
export const failureReason = (cause: Cause.Cause<unknown>): Record<string, unknown> => {
  if (Cause.isInterruptedOnly(cause)) return { kind: "aborted", reason: { kind: "user" } }
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure) && AiError.isAiError(failure.value)) {
    return { kind: "error", error: aiErrorFailure(failure.value) }
  }
  return { kind: "error", error: { message: Cause.pretty(cause), code: "UNKNOWN" } }
}

/**
 * The chat's history as the log has it.
 *
 * @since 0.2.0
 * @category utils
 */
export const historyOf = (entry: Entry) => Effect.map(entry.session.messages, (messages) => entry.fold.of(messages))

/**
 * The messages of one Prompt written as events of the turn's step; `response` when they are the
 * model's answer (their assistant message cites the chunks, the tools it ran get their
 * `tool/call`). Returns the seqs of the messages written.
 *
 * @since 0.2.0
 * @category utils
 */
export const writeMessages = (
  source: ChatSource,
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
    const { model, provider } = source
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

/**
 * `@effect/ai`'s message identity: the previous assistant message's id, else a new one.
 *
 * @since 0.2.0
 * @category utils
 */
export const messageIdFor = (history: Prompt.Prompt) =>
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

/**
 * The messages of a Prompt stamped with `@effect/ai`'s message id.
 *
 * @since 0.2.0
 * @category utils
 */
export const stamp = (prompt: Prompt.Prompt, messageId: string): Prompt.Prompt =>
  Prompt.fromMessages(prompt.content.map((m) =>
    Prompt.makeMessage(m.role as "user", {
      content: m.content as never,
      options: { ...m.options, [Chat.Persistence.key]: { messageId } }
    })
  ))

/**
 * Record a history set or edited outside a call (`Ref.set` / `Ref.update` on `history`), as
 * `@effect/ai`'s chat would send and save it: the messages after the longest common prefix of
 * the log's history and `current` are shadowed by one recorded replace (they stay in the log),
 * and the returned messages of `current` after that prefix are to be written next.
 *
 * @since 0.2.0
 * @category utils
 */
export const syncHistory = (source: ChatSource, entry: Entry, turn: number, step: number, current: Prompt.Prompt) =>
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
      if (shadowed.length > 0) yield* retract(source, session, turn, step, shadowed)
    }
    return Prompt.fromMessages(current.content.slice(common))
  })

/**
 * Shadow surface nodes by a recorded replace whose message projects to nothing (empty content).
 *
 * @since 0.2.0
 * @category utils
 */
export const retract = (source: ChatSource, session: SessionShape, turn: number, step: number, shadowed: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const id = yield* nextId
    const op: SurfaceOp = { op: "replace", start: shadowed[0], end: shadowed[shadowed.length - 1] }
    yield* session.append("assistant/message", {
      turn,
      step,
      message: { id, role: "assistant", content: [], source: { kind: "model", provider: source.provider, model: source.model } }
    }, { surfaceOp: op, sourceEventSeqs: shadowed })
  })
