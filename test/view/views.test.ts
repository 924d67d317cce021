/**
 * Properties of what the viewer shows, on random valid logs (test/arbitraries.ts) and random
 * text: the timeline's rows cover the events once, in order; time travel's surface and messages
 * are the generator's own model of them (independent of src); provenance agrees both ways; the
 * Markdown quotes any text verbatim and the HTML's data cannot be closed by any text.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "effect/FastCheck"
import { htmlEvents, markdownEvents } from "../../src/programs/view/Export.js"
import { provenanceOf, timelineRows, timeTravel } from "../../src/programs/view/Views.js"
import type { Event } from "../../src/schema/Events.js"
import { foldSurface } from "../../src/services/SurfaceManager.js"
import { anyValidLog } from "../arbitraries.js"
import { hostileSession } from "./helpers.js"

const json = (v: unknown) => JSON.parse(JSON.stringify(v))

describe("timeline, time travel and provenance on random valid logs", () => {
  it.prop("the rows cover every event once, in order, and a chunk run holds chunks of one step only", [anyValidLog], ([log]) => {
    const events = log.events as unknown as ReadonlyArray<Event>
    const rows = timelineRows(events)
    let next = 0
    for (const r of rows) {
      assert.strictEqual(r.seq, next)
      assert.strictEqual(r.type, events[r.seq].type)
      for (let s = r.seq + 1; s <= r.lastSeq; s++) {
        assert.strictEqual(events[s].type, "assistant/chunk")
        assert.strictEqual((events[s].data as any).step, (events[r.seq].data as any).step)
        assert.strictEqual((events[s].data as any).turn, (events[r.seq].data as any).turn)
      }
      next = r.lastSeq + 1
    }
    assert.strictEqual(next, events.length)
  })

  it.prop("time travel at a seq: the generator's surface before the next event, and at the end its messages", [
    anyValidLog.chain((log) => fc.tuple(fc.constant(log), fc.nat({ max: Math.max(0, log.events.length - 1) })))
  ], ([[log, k]]) => {
    const events = log.events as unknown as ReadonlyArray<Event>
    if (events.length === 0) return
    const at = timeTravel(events, k)!
    const expected = k + 1 < events.length ? log.nodesBefore[k + 1] : log.nodes
    assert.deepStrictEqual([...at.surface.nodes], [...expected])
    const last = timeTravel(events, events.length - 1)!
    assert.deepStrictEqual(json(last.messages), json(log.messages))
    assert.isUndefined(timeTravel(events, events.length))
  })

  it.prop("provenance both ways: a replacement lists what it shadowed, each of those names it", [anyValidLog], ([log]) => {
    const events = log.events as unknown as ReadonlyArray<Event>
    const fold = foldSurface(events)
    assert.ok("nodes" in fold)
    assert.strictEqual(fold.replacements.length, log.replacements)
    for (const r of fold.replacements) {
      assert.deepStrictEqual(provenanceOf(fold.replacements, events[r.seq]).replaced, r)
      for (const s of r.shadowedSeqs) {
        assert.ok(provenanceOf(fold.replacements, events[s]).shadowedBy.some((x) => x.seq === r.seq))
      }
    }
  })
})

describe("exports of any text", () => {
  const withText = (text: string): Event => {
    const [e] = hostileSession("p").events
    return { ...e, data: { ...(e.data as object), content: [{ type: "text", text }] } } as Event
  }
  const anyText = fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.constantFrom("```", "</script>", "</SCRIPT", "<!--", "\u2028"))

  it.prop("Markdown: the text verbatim between fences longer than any backtick run in it", [anyText], ([text]) => {
    const md = markdownEvents([withText(text)])
    const m = /\n(`{3,})\n([\s\S]*)\n\1\n/.exec(md)
    assert.ok(m !== null)
    assert.strictEqual(m[2], text)
    for (const run of text.match(/`+/g) ?? []) assert.isAbove(m[1].length, run.length)
  })

  it.prop("HTML: no text closes the data element, and the data reads back as the events", [anyText], ([text]) => {
    const events = [withText(text)]
    const html = htmlEvents(events)
    assert.strictEqual(html.match(/<\/script/gi)?.length, 1)
    assert.notMatch(html.slice(0, html.lastIndexOf("</script")), /<!--|<\/script/i)
    const data = /class="session-log-events">(.*)<\/script>\n$/s.exec(html)![1]
    assert.deepStrictEqual(JSON.parse(data), json(events))
  })
})
