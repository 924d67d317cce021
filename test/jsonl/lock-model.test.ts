/**
 * Model-based test of the JSONL lock protocol (SPEC §7.4.5, issue 11) with fast-check commands:
 * four actors, each with its own open file descriptions of one real session file, acquire,
 * release, crash (their descriptor closed without an unlock), pause while holding, try to take a
 * held lock, replace the file while holding it (as `replaceLog` does), and race a replacement
 * (a descriptor opened on the old file, locked after the holder replaced it and let go). In every
 * reachable state: at most one actor holds the lock of the file at the session's path, the
 * kernel agrees, and a lock is only ever given when nobody holds it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import { closeSync, mkdtempSync, openSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { nodeSyncFileSystem, type SyncFileSystem } from "../../src/layers/jsonl/SyncFileSystem.js"
import { type HeldLock, releaseLock, tryLockFile } from "../../src/layers/jsonl/SessionLock.js"
import { isLocked } from "./holder.js"

const ACTORS = 4

interface Model {
  holder: number | undefined
  paused: boolean
}

interface Real {
  readonly file: string
  readonly locks: Array<HeldLock | undefined>
  generation: number
}

/** The invariants of every reachable state. */
const checkInvariants = (m: Model, r: Real) => {
  const holders = r.locks.flatMap((lock, actor) => (lock === undefined ? [] : [actor]))
  assert.deepStrictEqual(holders, m.holder === undefined ? [] : [m.holder], "who holds a lock")
  if (m.holder !== undefined) {
    // the lock is on the file that is at the session's path, not on a replaced one
    assert.strictEqual(r.locks[m.holder]!.ino, String(statSync(r.file).ino))
  }
  assert.strictEqual(isLocked(r.file), m.holder !== undefined, "the kernel's view")
}

const take = (r: Real, actor: number, files: SyncFileSystem = nodeSyncFileSystem) => {
  const outcome = tryLockFile(files, r.file)
  if (typeof outcome === "object" && "fd" in outcome) r.locks[actor] = outcome
  return outcome
}

/** Write a new file and rename it over the session's path (the holder's `replaceLog`). */
const replaceFile = (r: Real) => {
  const temp = `${r.file}.${++r.generation}.tmp`
  writeFileSync(temp, `{"type":"session","version":1,"id":"s","createdAt":${r.generation}}\n`)
  renameSync(temp, r.file)
}

class Acquire implements fc.Command<Model, Real> {
  constructor(readonly actor: number) {}
  check = (m: Readonly<Model>) => m.holder !== this.actor
  run(m: Model, r: Real) {
    const outcome = take(r, this.actor)
    if (m.holder === undefined) {
      assert.isTrue(typeof outcome === "object" && "fd" in outcome, `actor ${this.actor} should get the free lock`)
      m.holder = this.actor
      m.paused = false
    } else {
      // a live (or paused) holder is never broken into
      assert.strictEqual(outcome, "held")
    }
    checkInvariants(m, r)
  }
  toString = () => `Acquire(${this.actor})`
}

class Release implements fc.Command<Model, Real> {
  constructor(readonly actor: number) {}
  check = (m: Readonly<Model>) => m.holder === this.actor
  run(m: Model, r: Real) {
    releaseLock(nodeSyncFileSystem, r.locks[this.actor]!)
    r.locks[this.actor] = undefined
    m.holder = undefined
    checkInvariants(m, r)
  }
  toString = () => `Release(${this.actor})`
}

/** The holder dies: its descriptor is closed by the kernel, with no unlock of ours. */
class Crash implements fc.Command<Model, Real> {
  constructor(readonly actor: number) {}
  check = (m: Readonly<Model>) => m.holder === this.actor
  run(m: Model, r: Real) {
    closeSync(r.locks[this.actor]!.fd)
    r.locks[this.actor] = undefined
    m.holder = undefined
    checkInvariants(m, r)
  }
  toString = () => `Crash(${this.actor})`
}

/** The holder stops (SIGSTOP, a VM freeze): it keeps the lock however long it is stopped. */
class Pause implements fc.Command<Model, Real> {
  constructor(readonly actor: number) {}
  check = (m: Readonly<Model>) => m.holder === this.actor
  run(m: Model, r: Real) {
    m.paused = true
    checkInvariants(m, r)
  }
  toString = () => `Pause(${this.actor})`
}

/** The holder replaces the file (rename over the path) and lets go. */
class Replace implements fc.Command<Model, Real> {
  constructor(readonly actor: number) {}
  check = (m: Readonly<Model>) => m.holder === this.actor && !m.paused
  run(m: Model, r: Real) {
    replaceFile(r)
    releaseLock(nodeSyncFileSystem, r.locks[this.actor]!)
    r.locks[this.actor] = undefined
    m.holder = undefined
    checkInvariants(m, r)
  }
  toString = () => `Replace(${this.actor})`
}

/**
 * An actor opens the file while another holds it; the holder replaces the file and lets go; the
 * actor's lock attempt then starts from its descriptor of the old file. It must end up holding
 * the new file's lock, never the old one's.
 */
class RaceReplacement implements fc.Command<Model, Real> {
  constructor(readonly actor: number) {}
  check = (m: Readonly<Model>) => m.holder !== undefined && m.holder !== this.actor && !m.paused
  run(m: Model, r: Real) {
    const stale = openSync(r.file, "a")
    const holder = m.holder!
    replaceFile(r)
    releaseLock(nodeSyncFileSystem, r.locks[holder]!)
    r.locks[holder] = undefined
    m.holder = undefined
    let handedStale = false
    const racing: SyncFileSystem = {
      ...nodeSyncFileSystem,
      open: (path, flags, mode) => {
        if (handedStale) return nodeSyncFileSystem.open(path, flags, mode)
        handedStale = true
        return stale
      }
    }
    const outcome = take(r, this.actor, racing)
    assert.isTrue(typeof outcome === "object" && "fd" in outcome, "the new file's lock is free")
    m.holder = this.actor
    m.paused = false
    checkInvariants(m, r)
  }
  toString = () => `RaceReplacement(${this.actor})`
}

const actor = fc.integer({ min: 0, max: ACTORS - 1 })
const commands = fc.commands([
  actor.map((a) => new Acquire(a)),
  actor.map((a) => new Release(a)),
  actor.map((a) => new Crash(a)),
  actor.map((a) => new Pause(a)),
  actor.map((a) => new Replace(a)),
  actor.map((a) => new RaceReplacement(a))
], { maxCommands: 60 })

describe("JSONL lock protocol (model-based)", () => {
  it.prop(
    "mutual exclusion in every reachable state: acquire, release, crash, pause, break attempts, replacement races",
    { commands },
    ({ commands }) => {
      const dir = mkdtempSync(join(tmpdir(), "lock-model-"))
      const real: Real = { file: join(dir, "s.jsonl"), locks: Array.from({ length: ACTORS }, () => undefined), generation: 0 }
      writeFileSync(real.file, `{"type":"session","version":1,"id":"s","createdAt":0}\n`)
      try {
        fc.modelRun(() => ({ model: { holder: undefined, paused: false }, real }), commands)
      } finally {
        for (const lock of real.locks) if (lock !== undefined) releaseLock(nodeSyncFileSystem, lock)
        rmSync(dir, { recursive: true, force: true })
      }
    },
    { fastCheck: { numRuns: 200 } }
  )

  it.effect("a crashed holder's lock is free for the next actor at once (no lease to expire)", () =>
    Effect.sync(() => {
      const dir = mkdtempSync(join(tmpdir(), "lock-model-"))
      const file = join(dir, "s.jsonl")
      writeFileSync(file, "x\n")
      try {
        const first = tryLockFile(nodeSyncFileSystem, file)
        assert.isTrue(typeof first === "object" && "fd" in first)
        assert.strictEqual(tryLockFile(nodeSyncFileSystem, file), "held")
        closeSync((first as HeldLock).fd)
        const second = tryLockFile(nodeSyncFileSystem, file)
        assert.isTrue(typeof second === "object" && "fd" in second)
        releaseLock(nodeSyncFileSystem, second as HeldLock)
        assert.strictEqual(tryLockFile(nodeSyncFileSystem, join(dir, "missing.jsonl")), "missing")
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }))
})
