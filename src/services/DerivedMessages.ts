/**
 * The derived messages of a live session (SPEC §4.6), kept incrementally: an append that adds a
 * surface node derives only that node's message; a replacement (a new `replaceGeneration`)
 * derives the whole surface again. Reads share one frozen snapshot until the messages change.
 */
import type { Event } from "../schema/Events.js"
import type { Message } from "../schema/Messages.js"
import { deriveEventMessage, type SurfaceTracker } from "./SurfaceManager.js"

/** The message cache of one session's surface. */
export class DerivedMessages {
  private messages: Array<Message> = []
  private derivedNodes = 0
  private generation = -1
  private snapshot: ReadonlyArray<Message> | undefined

  constructor(private readonly log: ReadonlyArray<Event>, private readonly tracker: SurfaceTracker) {}

  /**
   * The derived messages of the current surface: a frozen array the caller may keep (it never
   * changes), the same one until the surface gains or replaces a message.
   */
  read(): ReadonlyArray<Message> {
    const nodes = this.tracker.nodes
    const generation = this.tracker.replaceGeneration
    if (generation !== this.generation) {
      this.messages = []
      this.derivedNodes = 0
      this.generation = generation
      this.snapshot = undefined
    }
    for (; this.derivedNodes < nodes.length; this.derivedNodes++) {
      const m = deriveEventMessage(this.log[nodes[this.derivedNodes]])
      if (m !== undefined) {
        this.messages.push(m)
        this.snapshot = undefined
      }
    }
    return this.snapshot ??= Object.freeze(this.messages.slice())
  }
}
