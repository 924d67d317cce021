/**
 * Request reconstruction (SPEC §5.4, §5.5): the request header, request context and derived
 * messages in force right after any event of a validated log.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { SeqNotContiguous } from "../schema/Errors.js"
import { type Event, isReplacementSurfaceEvent } from "../schema/Events.js"
import { deepFreeze } from "../schema/Json.js"
import type { Message } from "../schema/Messages.js"
import {
  canonicalHeader,
  RequestContext,
  type RequestContext as RequestContextType,
  type RequestHeader,
  requestMessages
} from "../schema/RequestHeader.js"
import type { RequestSnapshot } from "./Session.js"
import { deriveEventMessage, foldSurface } from "./SurfaceManager.js"

/**
 * The request context a `request/context` event sets (§5.5), if its data is one.
 *
 * @since 0.1.0
 * @category utils
 */
export const foldContext = (event: Event): RequestContextType | undefined =>
  Schema.is(RequestContext)(event.data) ? event.data : undefined

/**
 * The latest request header and context of a log (SPEC §5.1, §5.2), advanced one event at a
 * time: a session handle keeps one current as it commits; `requestAtLog` folds a prefix.
 *
 * @since 0.1.0
 * @category models
 */
export class RequestFold {
  /**
   * The latest request header, in canonical form (§5.1).
   *
   * @since 0.1.0
   */
  header: RequestHeader | undefined = undefined
  /**
   * The latest request context (§5.5).
   *
   * @since 0.1.0
   */
  context: RequestContextType | undefined = undefined
  /**
   * R5: a replacement surface event follows the latest `request/header` (or there is none).
   *
   * @since 0.1.0
   */
  replacedSinceHeader = false

  /**
   * Advance by the next committed event.
   *
   * @since 0.1.0
   */
  apply(event: Event): void {
    if (event.type === "request/header") {
      this.header = Object.freeze(canonicalHeader((event.data as { header: RequestHeader }).header))
      this.replacedSinceHeader = false
    } else if (event.type === "request/context") {
      this.context = foldContext(event) ?? this.context
    } else if (isReplacementSurfaceEvent(event)) {
      this.replacedSinceHeader = true
    }
  }
}

/**
 * The request in force right after event `seq` of a validated log (SPEC §5.4): the header and
 * context folds over `events[0..seq]` and the messages of the surface folded over that prefix.
 *
 * @since 0.1.0
 * @category utils
 */
export const requestAtLog = (log: ReadonlyArray<Event>, seq: number): RequestSnapshot | SeqNotContiguous => {
  if (!Number.isSafeInteger(seq) || seq < 0 || seq >= log.length) {
    return new SeqNotContiguous({
      rule: "L10",
      seq,
      expected: log.length - 1,
      actual: seq,
      detail: log.length === 0 ? "the log is empty" : `a seq in [0, ${log.length - 1}] is required`
    })
  }
  const prefix = log.slice(0, seq + 1)
  const requests = new RequestFold()
  for (const e of prefix) requests.apply(e)
  const { context, header } = requests
  const fold = foldSurface(prefix)
  const msgs: Array<Message> = []
  for (const s of "nodes" in fold ? fold.nodes : []) {
    const m = deriveEventMessage(log[s])
    if (m !== undefined) msgs.push(m)
  }
  return deepFreeze({ header, context, messages: requestMessages(header, msgs) })
}

