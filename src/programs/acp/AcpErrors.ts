/**
 * Errors of the ACP adapter and their JSON-RPC mapping (docs/acp.md §2.3): the adapter's own
 * rejections (`AcpRejected`), the library's tagged errors (a missing session is -32002 with
 * `data.sessionId`, data rejections are invalid params, store failures internal errors), and
 * defects; each carries its tag, rule and message as `data`.
 */
import { RequestError } from "@agentclientprotocol/sdk"
import * as Cause from "effect/Cause"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/** A request the adapter refuses: bad params, an unknown session, a turn that failed. */
export class AcpRejected extends Schema.TaggedError<AcpRejected>()("AcpRejected", {
  code: Schema.Literal("invalid_params", "session_not_found", "internal"),
  detail: Schema.String,
  sessionId: Schema.optional(Schema.String),
  data: Schema.optional(Schema.Unknown)
}) {
  override get message(): string {
    return this.sessionId === undefined ? this.detail : `session ${this.sessionId}: ${this.detail}`
  }
}

/** Invalid params. */
export const invalidParams = (detail: string, sessionId?: string): AcpRejected =>
  new AcpRejected({ code: "invalid_params", detail, ...(sessionId === undefined ? {} : { sessionId }) })

/** An unknown or inactive session (-32002). */
export const sessionNotFound = (sessionId: string): AcpRejected =>
  new AcpRejected({ code: "session_not_found", detail: "no such session on this connection", sessionId })

/** Tags of the library's errors that reject the caller's data rather than fail the agent. */
const REJECTIONS: ReadonlySet<string> = new Set([
  "SessionExists",
  "SessionHeaderInvalid",
  "NotLosslessJson",
  "InvalidEnvelope",
  "MessageShapeInvalid",
  "FormatUnsupported",
  "LegacyFormRefused",
  "UnknownEventType"
])

const describe = (e: unknown): Record<string, unknown> => {
  const r = typeof e === "object" && e !== null ? (e as Record<string, unknown>) : {}
  return {
    ...(typeof r._tag === "string" ? { _tag: r._tag } : {}),
    ...(typeof r.rule === "string" ? { rule: r.rule } : {}),
    message: e instanceof Error ? e.message : String(e)
  }
}

/** The JSON-RPC error of a failed handler effect. */
export const toRequestError = (cause: Cause.Cause<unknown>): RequestError => {
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) {
    return RequestError.internalError({ message: Cause.pretty(cause).split("\n")[0] })
  }
  const e = failure.value
  if (e instanceof AcpRejected) {
    switch (e.code) {
      case "session_not_found":
        return RequestError.sessionNotFound(e.sessionId ?? "")
      case "invalid_params":
        return RequestError.invalidParams({ message: e.message }, e.message)
      default:
        return RequestError.internalError(e.data ?? { message: e.message }, e.message)
    }
  }
  const tag = (e as { readonly _tag?: unknown })._tag
  if (tag === "SessionNotFound") {
    const id = (e as { readonly sessionId?: unknown }).sessionId
    return RequestError.sessionNotFound(typeof id === "string" ? id : "")
  }
  const data = describe(e)
  return typeof tag === "string" && REJECTIONS.has(tag)
    ? RequestError.invalidParams(data, String(data.message))
    : RequestError.internalError(data, String(data.message))
}
