/**
 * `export --format markdown|html` (docs/viewer.md "Exports"): one session written as a Markdown
 * transcript or as one self-contained HTML file (the viewer's app with the events inline), piece
 * by piece as a validated read hands the events on. Loaded only by such an export (the HTML
 * needs the app's bundle, `ViewServe`).
 */
import * as Effect from "effect/Effect"
import type { Event } from "../../schema/Events.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import type { ReadEachResult } from "../../services/ReadEach.js"
import { htmlEnd, htmlEvents, htmlStart, inlinable, markdownEvents, markdownStart } from "../view/Export.js"
import { UsageError } from "./Target.js"
import { bundledAssets } from "./ViewServe.js"

/** The formats people read. */
export type ReadableFormat = "markdown" | "html"

/** A validated re-read of one session, handing on its events chunk by chunk. */
type Each<X> = <E>(onEvents: (events: ReadonlyArray<Event>) => Effect.Effect<void, E>) => Effect.Effect<ReadEachResult, X | E>

/**
 * How to write one session in `format` through `write` (a usage error when the HTML's app is not
 * built into this program).
 */
export const readableRender = <X>(format: ReadableFormat, header: SessionHeader, each: Each<X>) =>
  Effect.gen(function*() {
    if (format === "markdown") {
      return <E>(write: (text: string) => Effect.Effect<void, E>) =>
        Effect.zipRight(write(markdownStart(header)), Effect.asVoid(each((events) => write(markdownEvents(events)))))
    }
    const assets = bundledAssets()
    if (assets === undefined || !inlinable(assets)) {
      return yield* new UsageError({ detail: "the viewer's web app is not built into this program: run `npm run build:cli` first" })
    }
    return <E>(write: (text: string) => Effect.Effect<void, E>) =>
      Effect.gen(function*() {
        let last = header.createdAt
        yield* write(htmlStart(header, assets))
        const read = yield* each((events) => {
          for (const e of events) if (e.time > last) last = e.time
          return write(htmlEvents(events))
        })
        const tornTail = read.tornTail === undefined
          ? null
          : { fromSeq: read.tornTail.fromSeq, reason: read.tornTail.reason as string, line: read.tornTailExtent?.line ?? null }
        yield* write(htmlEnd(header, { events: read.count, lastActivity: last, tornTail }, assets))
      })
  })
