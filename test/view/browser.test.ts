/**
 * The viewer in a real browser (issue 32): headless Chromium driven by playwright-core against
 * `session-log view` (the CLI bundle) over a JSONL store, and the exported HTML opened from disk.
 * One browser for the file, one page reused; each scenario saves a screenshot
 * (test-artifacts/screenshots/view/). Waits are on conditions (a selector, a text), never a time.
 */
import { afterAll, assert, beforeAll, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Browser, Page } from "playwright-core"
import { contentText } from "../../src/programs/view/Views.js"
import { buildBundle, json, removeBundle, runCli } from "../cli/helpers.js"
import { describeBrowser, launch, screenshotPath } from "./chromium.js"
import { DEMO_FILE, demo, hostileSession, startViewer, type Viewer } from "./helpers.js"

let bundle: string
let dir: string
let store: string
let viewer: Viewer
let browser: Browser
let page: Page
const pageErrors: Array<string> = []

const writeSession = (file: string, header: object, events: ReadonlyArray<unknown>) =>
  fs.writeFileSync(file, [header, ...events].map((l) => JSON.stringify(l)).join("\n") + "\n")

const { header: demoHeader, events: demoEvents } = demo()

describeBrowser("the viewer in Chromium", () => {
  beforeAll(async () => {
    bundle = await buildBundle("view-browser")
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "view-browser-"))
    store = path.join(dir, "store")
    fs.mkdirSync(store)
    fs.copyFileSync(DEMO_FILE, path.join(store, "demo-session.jsonl"))
    const fork = await runCli(bundle, ["fork", "--store", `jsonl:${store}`, "--session", "demo-session", "--at", "104", "--child", "retry"], dir)
    assert.strictEqual(fork.code, 0, fork.stderr)
    const hostile = hostileSession()
    writeSession(path.join(store, "hostile.jsonl"), hostile.header, hostile.events)
    writeSession(path.join(store, "broken.jsonl"), { ...demoHeader, id: "broken" }, [
      ...demoEvents.slice(0, 10),
      { type: "user/message", seq: 10, time: 5, data: { id: "x", role: "user", content: "no array", source: { kind: "user" } }, surfaceOp: "append" }
    ])
    writeSession(path.join(store, "live.jsonl"), { ...demoHeader, id: "live" }, demoEvents.slice(0, 3))
    viewer = await startViewer(bundle, ["--store", `jsonl:${store}`], dir)
    browser = await launch()
    page = await browser.newPage({ viewport: { width: 1500, height: 950 } })
    page.on("pageerror", (e) => void pageErrors.push(e.message))
  })

  afterAll(async () => {
    await browser?.close()
    await viewer?.stop()
    removeBundle(bundle)
    fs.rmSync(dir, { recursive: true, force: true })
  })

  const open = async (hash = "") => {
    // a fresh load each time (a URL differing only in its hash would not reload the page)
    await page.goto("about:blank")
    await page.goto(`${viewer.origin}/?token=${viewer.token}${hash}`)
    await page.waitForSelector("body[data-ready=true]")
  }

  const shot = (name: string) => page.screenshot({ path: screenshotPath(name) })

  /** The messages the page shows for the exact request: role, id and text. */
  const shownRequest = () =>
    page.$$eval("[data-testid=request-messages] > li", (lis) =>
      lis.map((li) => ({
        role: li.getAttribute("data-role"),
        id: li.getAttribute("data-id"),
        text: li.querySelector(".text")?.textContent ?? ""
      })))

  /** What `session-log request --at` prints, as the page shows it. */
  const cliRequest = async (seq: number) => {
    const r = await runCli(bundle, ["request", "--json", "--store", `jsonl:${store}`, "--session", "demo-session", "--at", String(seq)], dir)
    const doc = json(r)
    return (doc.messages as Array<{ role: string; id: string; content: unknown }>).map((m) => {
      const text = contentText(m.content)
      return { role: m.role, id: String(m.id), text: text.length <= 2000 ? text : `${text.slice(0, 2000)} … (${text.length - 2000} more characters)` }
    })
  }

  it("the sessions list: each with its status, size and last activity", async () => {
    await open()
    const ids = await page.$$eval("button.session", (bs) => bs.map((b) => b.getAttribute("data-session")))
    assert.sameMembers(ids as Array<string>, ["demo-session", "retry", "hostile", "broken", "live"])
    assert.include(await page.textContent("button[data-session=demo-session]"), "✓ verified")
    assert.include(await page.textContent("button[data-session=demo-session]"), "191 events")
    assert.include(await page.textContent("button[data-session=broken]"), "✗ H5 at seq 10")
    await shot("01-sessions")
  })

  it("the fork tree: a child under its parent; search narrows the list", async () => {
    await open()
    const parentOfRetry = await page.$eval("button[data-session=retry]", (b) =>
      b.closest("ul[role=group]")?.parentElement?.querySelector(":scope > button.session")?.getAttribute("data-session"))
    assert.strictEqual(parentOfRetry, "demo-session")
    await page.fill("#search", "host")
    await page.waitForFunction(() => document.querySelectorAll("button.session").length === 1)
    assert.strictEqual(await page.getAttribute("button.session", "data-session"), "hostile")
    await shot("02-fork-tree-and-search")
  })

  it("a session's timeline: chunk runs folded into their text, tool calls paired, closers marked", async () => {
    await open()
    await page.click("button[data-session=demo-session]")
    await page.waitForSelector("li.row[data-seq='5']")
    assert.strictEqual(await page.getAttribute("li.row[data-seq='5']", "data-last"), "17")
    assert.include(await page.textContent("li.row[data-seq='5'] .text"), "Let me look at the files.")
    assert.include(await page.textContent("li.row[data-seq='19']"), "result at seq 20")
    assert.include(await page.textContent("li.row[data-seq='128']"), "repair closer")
    assert.include(await page.textContent("#range"), "of 191")
    await shot("03-timeline")
  })

  for (const [seq, when] of [[131, "before"], [133, "after"]] as const) {
    it(`time travel ${when} a compaction (seq ${seq}): the messages equal session-log request --at ${seq}`, async () => {
      await open(`#session=demo-session&seq=${seq}`)
      await page.waitForSelector(`#travel-title:text("At seq ${seq}")`)
      assert.deepStrictEqual(await shownRequest(), await cliRequest(seq))
      assert.include(await page.textContent("[data-testid=request-header]"), "scripted/demo-model")
      await shot(`04-time-travel-${when}-compaction`)
    })
  }

  it("the slider travels: moving it to a seq shows the request there", async () => {
    await open("#session=demo-session")
    await page.$eval("#seq", (el) => {
      const input = el as HTMLInputElement
      input.value = "60"
      input.dispatchEvent(new Event("change"))
    })
    await page.waitForSelector(`#travel-title:text("At seq 60")`)
    assert.deepStrictEqual(await shownRequest(), await cliRequest(60))
  })

  it("provenance both ways: a summary's shadowed events, and back from one of them", async () => {
    await open("#session=demo-session&seq=133")
    await page.waitForSelector("[data-testid=replaced-span]")
    assert.include(await page.textContent("[data-testid=replaced-span]"), "Replaces the span 2..81")
    const shadowed = await page.$$eval("[data-testid=shadowed] button", (bs) => bs.map((b) => b.getAttribute("data-goto")))
    assert.deepStrictEqual(shadowed, ["2", "18", "20", "35", "57", "62", "74", "79", "81"])
    await shot("05-provenance-summary")
    await page.click("[data-testid=shadowed] button[data-goto='2']")
    await page.waitForSelector(`#travel-title:text("At seq 2")`)
    await page.waitForSelector("[data-testid=shadowed-by]")
    assert.include(await page.textContent("[data-testid=shadowed-by]"), "shadowed by seq 133")
    await shot("06-provenance-shadowed")
    await page.click("[data-testid=shadowed-by] button[data-goto='133']")
    await page.waitForSelector(`#travel-title:text("At seq 133")`)
  })

  it("a pruned tool result shows what pruned it, and the prune what it trimmed", async () => {
    await open("#session=demo-session&seq=37")
    await page.waitForSelector("[data-testid=shadowed-by]")
    assert.include(await page.textContent("[data-testid=shadowed-by]"), "shadowed by seq 79")
    await page.click("[data-testid=shadowed-by] button[data-goto='79']")
    await page.waitForSelector("[data-testid=shadowed] button[data-goto='37']")
    assert.include(await page.textContent("[data-testid=shadowed]"), "# effect-session-log")
  })

  it("a log that fails to load: the rule, the seq, and the events before it", async () => {
    await open("#session=broken")
    await page.waitForSelector("#problem:not([hidden])")
    const problem = await page.textContent("#problem")
    assert.include(problem, "This log does not load: H5")
    assert.include(problem, "at seq 10")
    assert.include(problem, "10 events before it load")
    assert.strictEqual(await page.$$eval("li.row", (rows) => rows.length > 0), true)
    await shot("07-broken-log")
  })

  it("live: an event appended to the session appears in place, pushed from the store's follow", async () => {
    const asked: Array<string> = []
    const record = (r: { url: () => string }) => void asked.push(new URL(r.url()).pathname)
    page.on("request", record)
    await open("#session=live")
    await page.waitForSelector("li.row[data-seq='2']")
    const next = { ...demoEvents[2], seq: 3, time: demoEvents[2].time + 1, data: { ...(demoEvents[2].data as object), id: "live-1", content: [{ type: "text", text: "appended while watching" }] } }
    fs.appendFileSync(path.join(store, "live.jsonl"), JSON.stringify(next) + "\n")
    await page.waitForSelector("li.row[data-seq='3']", { timeout: 30_000 })
    assert.include(await page.textContent("li.row[data-seq='3']"), "appended while watching")
    page.off("request", record)
    // the page subscribed to the server's push and never polled the head
    assert.include(asked, "/api/sessions/live/live")
    assert.notInclude(asked, "/api/sessions/live/head")
    await shot("08-live-append")
  })

  it("keyboard only: Tab to a session, Enter opens it, arrows walk the timeline, Enter travels", async () => {
    await open()
    await page.keyboard.press("Tab") // the search field
    await page.keyboard.press("Tab") // the first session (the oldest: hostile)
    const first = await page.evaluate(() => document.activeElement?.getAttribute("data-session"))
    assert.strictEqual(first, "hostile")
    await page.keyboard.press("Enter")
    await page.waitForSelector("#title:text('hostile')")
    await page.waitForSelector("li.row[data-seq='0']")
    // Tab on from the session list reaches the timeline's controls, then its rows
    for (let i = 0; i < 20 && (await page.evaluate(() => document.activeElement?.getAttribute("data-seq"))) !== "0"; i++) {
      await page.keyboard.press("Tab")
    }
    assert.strictEqual(await page.evaluate(() => document.activeElement?.getAttribute("data-seq")), "0")
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("ArrowDown")
    assert.strictEqual(await page.evaluate(() => document.activeElement?.getAttribute("data-seq")), "2")
    await page.keyboard.press("Enter")
    await page.waitForSelector(`#travel-title:text("At seq 2")`)
    await shot("09-keyboard")
  })

  it("the token: refused when missing, and the page says why", async () => {
    await page.goto("about:blank")
    await page.goto(`${viewer.origin}/`)
    await page.waitForSelector("[data-testid=refused]")
    assert.include(await page.textContent("[data-testid=refused]"), "needs its token")
    assert.strictEqual(await page.$$eval("button.session", (bs) => bs.length), 0)
    await shot("10-token-refused")
  })

  it("the live stream refused (the token no longer accepted): the page stops it and says why", async () => {
    const asked: Array<string> = []
    const record = (r: { url: () => string }) => void asked.push(new URL(r.url()).pathname)
    // the server answers the live stream and the head as it answers a wrong token
    const refuse = (route: { fulfill: (r: object) => Promise<void> }) =>
      route.fulfill({ status: 401, contentType: "application/json", body: JSON.stringify({ error: "Unauthorized", detail: "a token is required" }) })
    await page.route("**/api/sessions/live/live*", refuse)
    await page.route("**/api/sessions/live/head*", refuse)
    page.on("request", record)
    try {
      await open("#session=live")
      await page.waitForSelector("[data-testid=refused]")
      assert.include(await page.textContent("[data-testid=refused]"), "needs its token")
      // one attempt at the stream, one question why; the refusal ended both
      assert.strictEqual(asked.filter((p) => p === "/api/sessions/live/live").length, 1)
      await shot("14-live-refused")
    } finally {
      page.off("request", record)
      await page.unroute("**/api/sessions/live/live*")
      await page.unroute("**/api/sessions/live/head*")
    }
  })

  it("hostile content is rendered inert: markup as text, no script run, controls and overrides visible", async () => {
    await open("#session=hostile")
    await page.waitForSelector("li.row[data-seq='3']")
    assert.strictEqual(await page.evaluate(() => (window as { __pwned?: number }).__pwned), undefined)
    assert.strictEqual(await page.$$eval("#rows img, #rows a, #rows script", (els) => els.length), 0)
    assert.include(await page.textContent("li.row[data-seq='0'] .text"), "<script>window.__pwned = 1</script>")
    assert.include(await page.textContent("li.row[data-seq='1'] .text"), "javascript:window.__pwned=3")
    const controls = await page.textContent("li.row[data-seq='2'] .text")
    assert.include(controls, "⟨U+202E⟩")
    assert.include(controls, "⟨U+0000⟩")
    assert.notInclude(controls, "\u202E")
    assert.include(await page.textContent("li.row[data-seq='3'] .text"), "198000 more characters")
    await page.click("li.row[data-seq='3']")
    await page.waitForSelector(`#travel-title:text("At seq 3")`)
    assert.strictEqual(await page.evaluate(() => (window as { __pwned?: number }).__pwned), undefined)
    await shot("11-hostile-content")
  })

  it("the exported HTML opens from disk: time travel works, the CSP lets the app run, nothing is fetched", async () => {
    const out = path.join(dir, "demo.html")
    const r = await runCli(bundle, ["export", "--format", "html", "--store", `jsonl:${store}`, "--session", "demo-session", "--out", out], dir)
    assert.strictEqual(r.code, 0, r.stderr)
    const requests: Array<string> = []
    const violations: Array<string> = []
    const listener = (req: { url: () => string }) => void requests.push(req.url())
    page.on("request", listener)
    page.on("console", (m) => void (m.text().includes("Content Security Policy") && violations.push(m.text())))
    await page.goto(`file://${out}#session=demo-session&seq=133`)
    await page.waitForSelector(`#travel-title:text("At seq 133")`)
    assert.deepStrictEqual(await shownRequest(), await cliRequest(133))
    await page.waitForSelector("[data-testid=replaced-span]")
    page.off("request", listener)
    assert.deepStrictEqual(requests.filter((u) => !u.startsWith("file://")), [])
    assert.deepStrictEqual(violations, [])
    await shot("12-exported-html")
  })

  it("no script error on any page", () => {
    assert.deepStrictEqual(pageErrors, [])
  })
})
