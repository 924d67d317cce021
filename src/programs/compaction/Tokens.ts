/**
 * Token estimation and surface measurement (SPEC §9 intro). The default estimator is
 * `ceil(utf8Bytes(serialise(x)) / 4)`; both compaction and pruning take an estimator option so a
 * real tokenizer can be plugged in. A measurement is aligned with the surface (P6 otherwise).
 *
 * @since 0.1.0
 */
import { CompactionRejected } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { encodeJson, type Json, utf8Length } from "../../schema/Json.js"
import type { ContentBlock, Message } from "../../schema/Messages.js"
import type { RequestHeader } from "../../schema/RequestHeader.js"
import { deriveEventMessage } from "../../services/SurfaceManager.js"

const ceilQuarter = (value: unknown): number => Math.ceil(utf8Length(encodeJson(value as Json)) / 4)

/**
 * `ceil(utf8Bytes(serialise(message.content)) / 4)`.
 *
 * @since 0.1.0
 * @category utils
 */
export const estimateTokens = (message: { readonly content: ReadonlyArray<ContentBlock> }): number =>
  ceilQuarter(message.content)

/**
 * The same formula over the header's `system` and over its `tools` array (absent parts count 0).
 *
 * @since 0.1.0
 * @category utils
 */
export const estimateHeaderTokens = (
  header: { readonly system?: string | undefined; readonly tools?: ReadonlyArray<unknown> | undefined } | undefined
): number => {
  if (header === undefined) return 0
  const system = header.system === undefined ? 0 : ceilQuarter(header.system)
  const tools = header.tools === undefined ? 0 : ceilQuarter(header.tools)
  return system + tools
}

/**
 * A token estimator: deterministic, per message and per header.
 *
 * @since 0.1.0
 * @category models
 */
export interface TokenEstimator {
  readonly message: (message: Message) => number
  readonly header: (header: RequestHeader | undefined) => number
}

/**
 * The default estimator of SPEC §9.
 *
 * @since 0.1.0
 * @category utils
 */
export const defaultEstimator: TokenEstimator = { message: estimateTokens, header: estimateHeaderTokens }

/**
 * One measured surface node.
 *
 * @since 0.1.0
 * @category models
 */
export interface MeasuredNode {
  readonly seq: number
  readonly tokens: number
}

/**
 * A measurement of the surface: the same seqs in the same order as the surface.
 *
 * @since 0.1.0
 * @category models
 */
export interface Measurement {
  readonly nodes: ReadonlyArray<MeasuredNode>
}

/**
 * P6 with a detail.
 *
 * @since 0.1.0
 * @category utils
 */
export const corrupt = (detail: string): CompactionRejected =>
  new CompactionRejected({ rule: "P6", reason: "corrupt-surface", detail })

/**
 * Measure the surface `nodes` over the log: nodes that project to no message count 0; a node
 * without a log event is a corrupt surface (P6).
 *
 * @since 0.1.0
 * @category utils
 */
export const measureSurface = (
  nodes: ReadonlyArray<number>,
  events: ReadonlyArray<Event>,
  estimator: TokenEstimator = defaultEstimator
): Measurement | CompactionRejected => {
  const out: Array<MeasuredNode> = []
  for (const seq of nodes) {
    const event = events[seq]
    if (event === undefined || event.seq !== seq) return corrupt(`surface seq ${seq} has no log event`)
    const message = deriveEventMessage(event)
    out.push({ seq, tokens: message === undefined ? 0 : estimator.message(message) })
  }
  return { nodes: out }
}

/**
 * P6 unless the measurement names exactly the surface seqs, in order.
 *
 * @since 0.1.0
 * @category utils
 */
export const checkAligned = (measurement: Measurement, nodes: ReadonlyArray<number>): CompactionRejected | undefined => {
  if (measurement.nodes.length !== nodes.length) {
    return corrupt(`measurement has ${measurement.nodes.length} nodes, the surface ${nodes.length}`)
  }
  for (let i = 0; i < nodes.length; i++) {
    const m = measurement.nodes[i]
    if (m.seq !== nodes[i]) return corrupt(`measurement node ${i} is seq ${m.seq}, the surface has ${nodes[i]}`)
    if (!Number.isFinite(m.tokens) || m.tokens < 0) return corrupt(`measurement node ${i} has invalid tokens`)
  }
  return undefined
}

/**
 * The estimated size of a request: its messages plus the header's `system` and `tools`.
 *
 * @since 0.1.0
 * @category utils
 */
export const measureRequest = (
  messages: ReadonlyArray<Message>,
  header: RequestHeader | undefined,
  estimator: TokenEstimator = defaultEstimator
): number => {
  let sum = estimator.header(header)
  for (const m of messages) sum += estimator.message(m)
  return sum
}

/**
 * True iff two measurements have the same seqs and token counts.
 *
 * @since 0.1.0
 * @category utils
 */
export const sameMeasurement = (a: Measurement, b: Measurement): boolean => {
  if (a.nodes.length !== b.nodes.length) return false
  for (let i = 0; i < a.nodes.length; i++) {
    if (a.nodes[i].seq !== b.nodes[i].seq || a.nodes[i].tokens !== b.nodes[i].tokens) return false
  }
  return true
}
