/**
 * Request reconstruction (SPEC §5.4, §5.5): the request header, request context and derived
 * messages in force right after any event of a validated log.
 */
import * as Schema from "effect/Schema"
import { SeqNotContiguous } from "../schema/Errors.js"
import type { Event } from "../schema/Events.js"
import { deepFreeze } from "../schema/Json.js"
import type { Message } from "../schema/Messages.js"
import {
  canonicalHeader,
  RequestContext,
  type RequestContext as RequestContextType,
  type RequestHeader
} from "../schema/RequestHeader.js"
import type { RequestSnapshot } from "./Session.js"
import { deriveEventMessage, foldSurface } from "./SurfaceManager.js"

/** The request context a `request/context` event sets (§5.5), if its data is one. */
export const foldContext = (event: Event): RequestContextType | undefined =>
  Schema.is(RequestContext)(event.data) ? event.data : undefined

/**
 * The request in force right after event `seq` of a validated log (SPEC §5.4): the header and
 * context folds over `events[0..seq]` and the messages of the surface folded over that prefix.
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
  let header: RequestHeader | undefined
  let context: RequestContextType | undefined
  for (const e of prefix) {
    if (e.type === "request/header") header = canonicalHeader((e.data as { header: RequestHeader }).header)
    else if (e.type === "request/context") context = foldContext(e) ?? context
  }
  const fold = foldSurface(prefix)
  const msgs: Array<Message> = []
  for (const s of "nodes" in fold ? fold.nodes : []) {
    const m = deriveEventMessage(log[s])
    if (m !== undefined) msgs.push(m)
  }
  return deepFreeze({ header, context, messages: msgs })
}

