/**
 * `session-log show --follow` (issue 31, docs/cli.md): the CLI process prints the session, then
 * each event another process commits, one JSON line each with `--json`, until interrupted; and
 * `list --watch`, the sessions then each one that appears or changes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn } from "node:child_process"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { BIN } from "../cli/helpers.js"
import { headerFor, pluginEvents } from "../store-contract/contract.js"
import { storeAt, tempDir } from "./stores.js"

/** `session-log <args>`, its stdout lines as they come, and a wait for a number of them. */
const startCli = (args: ReadonlyArray<string>) => {
  const proc = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] })
  const lines: Array<string> = []
  let rest = ""
  let stderr = ""
  const waiters: Array<() => void> = []
  proc.stdout.setEncoding("utf8").on("data", (text: string) => {
    const parts = (rest + text).split("\n")
    rest = parts.pop()!
    lines.push(...parts)
    waiters.splice(0).forEach((wake) => wake())
  })
  proc.stderr.setEncoding("utf8").on("data", (text: string) => void (stderr += text))
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => {
    waiters.splice(0).forEach((wake) => wake())
    resolve(code)
  }))
  const untilLines = (predicate: (lines: ReadonlyArray<string>) => boolean) =>
    Effect.promise(() =>
      new Promise<void>((resolve, reject) => {
        const check = () =>
          predicate(lines) ? resolve() : proc.exitCode !== null ? reject(new Error(`exited: ${stderr}`)) : waiters.push(check)
        check()
      })
    )
  const until = (n: number) =>
    Effect.promise(() =>
      new Promise<void>((resolve, reject) => {
        const check = () =>
          lines.length >= n ? resolve() : proc.exitCode !== null ? reject(new Error(`exited: ${stderr}`)) : waiters.push(check)
        check()
      })
    )
  return { proc, lines, until, untilLines, exited }
}

describe("session-log show --follow", () => {
  it.scopedLive("--json: the stored events, then each committed one, one JSON line each; --type filters the new ones too", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const db = `${dir}/sessions.db`
      const store = Context.get(yield* Layer.build(storeAt("sqlite", db)), SessionStore)
      const id = "followed"
      yield* store.create(headerFor(id))
      yield* store.append(id, pluginEvents(0, 2), { expectedSeq: 0 })
      const all = startCli(["show", "--store", db, "--session", id, "--follow", "--json"])
      const some = startCli(["show", "--store", db, "--session", id, "--follow", "--json", "--from", "3"])
      yield* all.until(2)
      yield* store.append(id, pluginEvents(2, 3, "live"), { expectedSeq: 2 })
      yield* store.append(id, pluginEvents(5, 1, "more"), { expectedSeq: 5 })
      yield* all.until(6)
      yield* some.until(3)
      for (const cli of [all, some]) {
        cli.proc.kill("SIGINT")
        yield* Effect.promise(() => cli.exited)
      }
      const stored = (yield* store.readFrom(id, 0)).map((e) => encodeEvent(e as Event))
      assert.deepStrictEqual(all.lines, stored)
      assert.deepStrictEqual(some.lines, stored.slice(3))
    }))

  it.scopedLive("a .jsonl path with --follow is a usage error (exit 2)", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const root = Context.get(yield* Layer.build(storeAt("jsonl-plain", dir)), SessionStore)
      yield* root.create(headerFor("f"))
      yield* root.append("f", pluginEvents(0, 1), { expectedSeq: 0 })
      const cli = startCli(["show", `${dir}/f.jsonl`, "--follow"])
      assert.strictEqual(yield* Effect.promise(() => cli.exited), 2)
    }))

  it.scopedLive("list --watch --json: the sessions, then a line for each session that appears or changes", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const db = `${dir}/sessions.db`
      const store = Context.get(yield* Layer.build(storeAt("sqlite", db)), SessionStore)
      yield* store.create(headerFor("first", 1))
      yield* store.append("first", pluginEvents(0, 2), { expectedSeq: 0 })
      const cli = startCli(["list", "--store", db, "--watch", "--json"])
      yield* cli.until(1)
      yield* store.append("first", pluginEvents(2, 1), { expectedSeq: 2 })
      yield* store.create(headerFor("second", 2))
      yield* store.append("second", pluginEvents(0, 1), { expectedSeq: 0 })
      const rows = () => cli.lines.map((l) => JSON.parse(l) as { id: string; events: number })
      yield* cli.untilLines(() => {
        const r = rows()
        return r.some((x) => x.id === "first" && x.events === 3) && r.some((x) => x.id === "second" && x.events === 1)
      })
      cli.proc.kill("SIGINT")
      yield* Effect.promise(() => cli.exited)
      const r = rows()
      assert.deepStrictEqual([r[0].id, r[0].events], ["first", 2])
      // each (session, event count) shows once: a session that did not change is not printed again
      const keys = r.map((x) => `${x.id}:${x.events}`)
      assert.strictEqual(new Set(keys).size, keys.length)
    }))
})
