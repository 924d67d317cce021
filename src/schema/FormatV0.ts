/**
 * The frozen v0→v1 edge (SPEC §8.3): a pure function run on raw version-0 events before any
 * current validation. It refuses the removed legacy forms (K10), applies exactly the enumerated
 * lossless normalisations, and reports malformed legacy shapes as corruption (K11). Frozen: a
 * later format adds a v1→v2 edge instead of changing this one.
 */
import { LegacyFormRefused, StoreCorrupt } from "./Errors.js"
import type { SessionHeader } from "./SessionHeader.js"
import { isRecord } from "./Validation.js"

type Rec = Record<string, unknown>

/**
 * The reference design's log-only types outside the known vocabulary (SPEC §8.3 normalisation
 * 6): none of them ever reached a model, so the upgrade marks them `ignorable: true`.
 */
export const REFERENCE_LOG_ONLY_TYPES: ReadonlySet<string> = new Set([
  "agent-preset/selected",
  "agent/inbox/spliced",
  "approval/asked",
  "approval/decided",
  "approval/policy",
  "command/done",
  "command/run",
  "feedback/record",
  "goal/change",
  "hook/invoked",
  "hook/result",
  "permission/preset",
  "plan/mode",
  "sandbox/mode",
  "schedule/change",
  "session/title",
  "session/title-llm-request",
  "subagent/descriptor",
  "team/member",
  "team/message/delivered",
  "team/message/queued",
  "team/task",
  "tool-workflow/agent-end",
  "tool-workflow/agent-start",
  "tool-workflow/run-end",
  "tool-workflow/run-start",
  "tool/code-dispatch",
  "tool/code-dispatch-start",
  "web/deepseek-search-llm-request"
])
const isNonEmptyString = (v: unknown): v is string => typeof v === "string" && v.length > 0
const isTurn = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 1
const has = (r: Rec, key: string): boolean => Object.prototype.hasOwnProperty.call(r, key)
const exactKeys = (r: Rec, keys: ReadonlyArray<string>): boolean => {
  const own = Object.keys(r)
  return own.length === keys.length && keys.every((k) => has(r, k))
}

/** Define a key as plain data (never through a `__proto__` setter, A13). */
const put = (r: Rec, key: string, value: unknown): void => {
  Object.defineProperty(r, key, { value, writable: true, enumerable: true, configurable: true })
}

/** Copy a record, replacing the first of `drop` keys met by `[key, value]` and omitting the rest. */
const rebuild = (r: Rec, drop: ReadonlyArray<string>, key: string, value: unknown): Rec => {
  const out: Rec = {}
  let placed = false
  for (const k of Object.keys(r)) {
    if (drop.includes(k)) {
      if (!placed) {
        put(out, key, value)
        placed = true
      }
      continue
    }
    put(out, k, r[k])
  }
  if (!placed) put(out, key, value)
  return out
}

const withIdentity = (r: Rec, id: string): Rec => {
  const out: Rec = { id, role: "user" }
  for (const k of Object.keys(r)) if (k !== "id" && k !== "role") put(out, k, r[k])
  return out
}

const corrupt = (seq: number, form: string, detail: string) =>
  new StoreCorrupt({ rule: "K11", seq, detail: `malformed legacy ${form} at seq ${seq}: ${detail}` })

const TERMINAL_KINDS: ReadonlySet<string> = new Set(["completed", "blocked", "max-tokens", "interrupted"])

const upgradeTurnEnd = (data: unknown, seq: number): Rec | StoreCorrupt => {
  if (!isRecord(data) || !exactKeys(data, ["turn", "reason"]) || !isTurn(data.turn)) {
    return corrupt(seq, "turn/end", "data must be exactly { turn, reason }")
  }
  const reason = data.reason
  if (!isRecord(reason) || typeof reason.kind !== "string") {
    return corrupt(seq, "turn/end", "reason must be an object with a string kind")
  }
  const kind = reason.kind
  const turn = data.turn
  if (TERMINAL_KINDS.has(kind)) {
    return exactKeys(reason, ["kind"]) ? data : corrupt(seq, "turn/end", `reason "${kind}" has extra keys`)
  }
  if (kind === "aborted") {
    return exactKeys(reason, ["kind"]) ? { turn, reason: { kind: "aborted", reason: { kind: "legacy" } } } : data
  }
  if (kind === "disposed") return { turn, reason: { kind: "aborted", reason: { kind: "disposed" } } }
  if (kind === "error") {
    if (has(reason, "error")) return data
    const step = reason.step
    if (has(reason, "step") && !(typeof step === "number" && Number.isSafeInteger(step) && step >= 0)) {
      return corrupt(seq, "turn/end", "error reason step must be a non-negative integer")
    }
    if (has(reason, "failure")) {
      const f = reason.failure
      if (!isRecord(f) || typeof f.message !== "string" || typeof f.code !== "string") {
        return corrupt(seq, "turn/end", "error failure must carry a message and a code")
      }
      return { turn, reason: { kind: "error", error: f } }
    }
    if (typeof reason.message === "string") {
      if (has(reason, "code") && typeof reason.code !== "string") {
        return corrupt(seq, "turn/end", "error code must be a string")
      }
      const code = typeof reason.code === "string" ? reason.code : "UNKNOWN"
      return { turn, reason: { kind: "error", error: { message: reason.message, code } } }
    }
    return corrupt(seq, "turn/end", "an error reason without error, failure or message")
  }
  return data
}

/** Upgrade a version-0 session header and its raw events to version 1 (SPEC §8.3). */
export const upgradeV0 = (
  sessionId: string,
  header: SessionHeader,
  events: ReadonlyArray<unknown>
):
  | LegacyFormRefused
  | StoreCorrupt
  | { readonly header: SessionHeader; readonly events: ReadonlyArray<unknown> } =>
{
  const out: Array<unknown> = []
  const legacyId = (seq: number) => `legacy-message:${sessionId}:${seq}`
  for (let i = 0; i < events.length; i++) {
    const e = events[i]
    if (!isRecord(e) || typeof e.type !== "string") {
      out.push(e)
      continue
    }
    const seq = typeof e.seq === "number" ? e.seq : i
    const data = e.data
    // refusals first
    if (e.type === "request/header-delta") return new LegacyFormRefused({ rule: "K10", seq, form: "request/header-delta" })
    if (e.type === "mode/set") return new LegacyFormRefused({ rule: "K10", seq, form: "mode/set" })
    if (e.type === "request/header" && isRecord(data) && data.reason === "fallback") {
      return new LegacyFormRefused({ rule: "K10", seq, form: "request/header reason fallback" })
    }
    let next: Rec | StoreCorrupt | undefined
    switch (e.type) {
      case "user/message":
        if (isRecord(data) && has(data, "content") && has(data, "source") && !has(data, "id") && !has(data, "role") &&
          !has(data, "message")) next = withIdentity(data, legacyId(seq))
        break
      case "context/message":
        if (isRecord(data) && has(data, "content") && has(data, "source") && !has(data, "id")) {
          next = withIdentity(data, legacyId(seq))
        }
        break
      case "assistant/message":
        if (isRecord(data) && has(data, "content") && has(data, "provenance") && !has(data, "message")) {
          const provenance = isRecord(data.provenance) ? data.provenance : {}
          next = rebuild(data, ["content", "provenance"], "message", {
            id: legacyId(seq),
            role: "assistant",
            content: data.content,
            source: { ...provenance, kind: "model" }
          })
        }
        break
      case "tool/result":
        if (
          isRecord(data) && has(data, "callId") && has(data, "content") && has(data, "isError") && !has(data, "message")
        ) {
          let id = legacyId(seq)
          const op = e.surfaceOp
          if (isRecord(op) && typeof op.start === "number") {
            const target = out[op.start]
            const targetMessage = isRecord(target) && isRecord(target.data) ? target.data.message : undefined
            const targetId = isRecord(targetMessage) ? targetMessage.id : undefined
            if (typeof targetId === "string") id = targetId
          }
          next = rebuild(data, ["callId", "content", "isError"], "message", {
            id,
            role: "user",
            content: [{ type: "tool-result", toolCallId: data.callId, content: data.content, isError: data.isError }],
            source: { kind: "tool", callId: data.callId }
          })
        }
        break
      case "turn/start":
        if (isRecord(data) && has(data, "trigger")) {
          const trigger = data.trigger
          next = exactKeys(data, ["turn", "trigger"]) && isTurn(data.turn) && isRecord(trigger) &&
              isNonEmptyString(trigger.kind)
            ? { turn: data.turn }
            : corrupt(seq, "turn/start", "a pre-loop turn/start must be exactly { turn, trigger: { kind } }")
        }
        break
      case "turn/end":
        next = upgradeTurnEnd(data, seq)
        break
      case "steering/message": {
        let converted: Rec | StoreCorrupt
        if (isRecord(data) && exactKeys(data, ["turn", "message"]) && isRecord(data.message)) {
          converted = data.message
        } else if (isRecord(data) && exactKeys(data, ["turn", "content", "source"])) {
          converted = { content: data.content, source: data.source, id: legacyId(seq), role: "user" }
        } else {
          converted = corrupt(seq, "steering/message", "expected { turn, message } or { turn, content, source }")
        }
        if (converted instanceof StoreCorrupt) return converted
        out.push({ ...e, type: "user/message", data: converted })
        continue
      }
    }
    if (next instanceof StoreCorrupt) return next
    if (next === undefined && REFERENCE_LOG_ONLY_TYPES.has(e.type) && !has(e, "surfaceOp") && !has(e, "ignorable")) {
      // normalisation 6: the reference design's own log-only vocabulary, marked and kept as is
      out.push({ ...e, ignorable: true })
      continue
    }
    out.push(next === undefined || next === data ? e : { ...e, data: next })
  }
  return { header: { ...header, version: 1 }, events: out }
}
