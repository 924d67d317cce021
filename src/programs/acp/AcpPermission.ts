/**
 * The permission gate of the ACP adapter (docs/acp.md §1.4): the pre-execution policy of the agent
 * loop. A tool the current mode does not offer is denied; a gated tool asks the client with
 * `session/request_permission` about the call already announced as a pending `tool_call`.
 * It fails closed: a cancelled or unknown outcome, a reject, or a transport failure denies.
 */
import * as acp from "@agentclientprotocol/sdk"
import * as Effect from "effect/Effect"
import type { ToolCallDecision, ToolCallRequest } from "../agent/TurnTypes.js"
import { parseArgs, type ToolPresenter } from "./AcpProjection.js"
import type { AcpSession } from "./AcpSessions.js"

/** The options offered for a gated call. */
export const PERMISSION_OPTIONS: Array<acp.PermissionOption> = [
  { optionId: "allow-once", name: "Allow", kind: "allow_once" },
  { optionId: "allow-always", name: "Always allow", kind: "allow_always" },
  { optionId: "reject-once", name: "Reject", kind: "reject_once" }
]

const deny = (code: string, text: string): ToolCallDecision => ({ deny: { code, text, name: "ToolCallDenied" } })

/** What the gate needs to know about the session and the client. */
export interface GateContext {
  readonly entry: () => AcpSession | undefined
  readonly client: acp.AgentContext
  readonly gated: ReadonlySet<string>
  readonly presenter: ToolPresenter
  /** The tools the current mode offers (undefined: all). */
  readonly offered: () => ReadonlyArray<string> | undefined
}

/** The loop's `beforeToolCall` for one session. */
export const permissionGate = (ctx: GateContext) => (call: ToolCallRequest): Effect.Effect<ToolCallDecision> =>
  Effect.gen(function*() {
    const entry = ctx.entry()
    if (entry === undefined) return deny("SESSION_CLOSED", "The session was closed before this tool call ran.")
    const offered = ctx.offered()
    if (offered !== undefined && !offered.includes(call.name)) {
      return deny("TOOL_NOT_OFFERED", `The tool ${call.name} is not available in ${entry.mode} mode; it did not run.`)
    }
    if (!ctx.gated.has(call.name) || entry.allowAlways.has(call.name)) return undefined
    yield* entry.drain // the pending tool_call is on the wire before the request that refers to it
    const rawInput = parseArgs(call.arguments)
    const shown = ctx.presenter(call.name, rawInput)
    const response = yield* Effect.tryPromise((signal) =>
      ctx.client.request(acp.methods.client.session.requestPermission, {
        sessionId: entry.id,
        toolCall: { toolCallId: call.callId, title: shown.title, kind: shown.kind, status: "pending", rawInput },
        options: PERMISSION_OPTIONS
      }, { cancellationSignal: signal })
    ).pipe(Effect.either)
    if (response._tag === "Left") {
      return deny("PERMISSION_UNAVAILABLE", "The permission request failed, so the tool call was denied; it did not run.")
    }
    const outcome = response.right.outcome
    if (outcome.outcome === "selected" && outcome.optionId === "allow-once") return undefined
    if (outcome.outcome === "selected" && outcome.optionId === "allow-always") {
      entry.allowAlways.add(call.name)
      return undefined
    }
    return outcome.outcome === "cancelled"
      ? deny("PERMISSION_CANCELLED", "The permission request was cancelled; the tool call did not run.")
      : deny("PERMISSION_DENIED", "The user denied this tool call; it did not run.")
  })
