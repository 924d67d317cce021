/**
 * `export --format markdown|html` through the binary (docs/viewer.md "Exports"): the Markdown
 * transcript's messages, tool calls and results and compaction notes; session text quoted
 * verbatim (a fence longer than any backtick run in it); the HTML file self-contained (the app
 * inline, allowed by its hash, no URL to fetch); one session only. The HTML opened in Chromium is
 * in browser.test.ts.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { htmlEnd, htmlEvents, htmlStart, markdownEvents } from "../../src/programs/view/Export.js"
import type { SessionHeader } from "../../src/schema/SessionHeader.js"
import { buildBundle, removeBundle, runCli } from "../cli/helpers.js"
import { DEMO_FILE, hostileSession } from "./helpers.js"

let bundle: string
let dir: string

beforeAll(async () => {
  bundle = await buildBundle("view-export")
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "view-export-"))
})

afterAll(() => {
  removeBundle(bundle)
  fs.rmSync(dir, { recursive: true, force: true })
})

describe("export --format markdown", () => {
  it("a transcript: messages, tool calls and results, compactions and prunings as notes", async () => {
    const r = await runCli(bundle, ["export", "--format", "markdown", DEMO_FILE], dir)
    assert.strictEqual(r.code, 0, r.stderr)
    const md = r.stdout
    assert.match(md, /^# Session demo-session\n/)
    assert.include(md, "## User (seq 2)\n\n```\nWhat is in this repository?\n```\n")
    assert.include(md, "### Tool call list\\_files (seq 19, call-1)\n\n```json\n{\"dir\":\".\"}\n```\n")
    assert.include(md, "### Tool result (seq 20, call-1)")
    assert.match(md, /> \*\*Pruned\*\* \(seq 78\): tool results 37 were trimmed/)
    assert.match(md, /> \*\*Compaction\*\* \(seq 132\)/)
    assert.include(md, "> **Replaces** events 2–81 (seq 133).")
    assert.include(md, "> **Turn 3 was interrupted** (seq 128)")
    // the order of the log
    assert.isBelow(md.indexOf("(seq 2)"), md.indexOf("(seq 133)"))
  })

  it("session text is quoted verbatim: a fence longer than any backtick run inside it", () => {
    const text = "```\n# not a heading\n````\n<script>x()</script>"
    const [event] = hostileSession("quoted").events
    const md = markdownEvents([{ ...event, data: { ...(event.data as object), content: [{ type: "text", text }] } } as typeof event])
    assert.include(md, `\`\`\`\`\`\n${text}\n\`\`\`\`\`\n`)
  })

  it("a whole store is refused (one session per readable export), nothing written", async () => {
    const store = path.join(dir, "store")
    fs.mkdirSync(store)
    const whole = await runCli(bundle, ["export", "--format", "html", "--store", `jsonl:${store}`, "--out", path.join(dir, "x")], dir)
    assert.strictEqual(whole.code, 2)
    assert.match(whole.stderr, /exports one session/)
    assert.isFalse(fs.existsSync(path.join(dir, "x")))
  })
})

describe("export --format html", () => {
  it("one self-contained file: the app inline under a hash CSP, the events as inert JSON, nothing fetched", async () => {
    const out = path.join(dir, "demo.html")
    const r = await runCli(bundle, ["export", "--format", "html", DEMO_FILE, "--out", out], dir)
    assert.strictEqual(r.code, 0, r.stderr)
    const html = fs.readFileSync(out, "utf8")
    assert.match(html, /<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'sha256-[A-Za-z0-9+/=]+'/)
    // no element loads anything (and default-src 'none' would refuse it)
    assert.notMatch(html, /<(script|link|img|iframe)[^>]+(src|href)=/)
    assert.include(html, `<script type="application/json" class="session-log-events">`)
    assert.include(html, `<script type="application/json" id="session-log-summary">`)
  })

  it("hostile text cannot close the data element it is in", () => {
    const { header, events } = hostileSession()
    const assets = { appJs: "void 0", appCss: "body{}" }
    const html = htmlStart(header as unknown as SessionHeader, assets) + htmlEvents(events) +
      htmlEnd(header as unknown as SessionHeader, { events: events.length, lastActivity: 0, tornTail: null }, assets)
    // the only </script> closers are the file's own: 1 data chunk, the summary and the app
    assert.strictEqual(html.match(/<\/script/gi)?.length, 3)
    // and the data reads back as the events
    const data = /class="session-log-events">(.*?)<\/script>/s.exec(html)![1]
    assert.deepStrictEqual(JSON.parse(data), events)
  })
})
