/**
 * The wake-ups of a JSONL follower (docs/follow.md "JSONL"): a kernel watch (`fs.watch`, inotify
 * on Linux) of the directory holding a session's files — appends, torn-tail truncations and the
 * renames of `replaceLog`, `migrate` and `compact` all show there — plus a cheap `stat` poll of
 * the files as a safety net where a file system reports no events. node:fs directly: the
 * platform's `watch` does not say when it is armed, and a follower must read after that.
 */
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { StoreFailure } from "../../schema/Errors.js"

/**
 * How often the safety net compares the files' identity, size and modification time, in
 * milliseconds (the watch wakes a follower at once; this bounds the latency where it cannot).
 *
 * @since 0.2.0
 * @category constants
 */
export const STAT_POLL_MILLIS = 500

/** What identifies the files' content for the safety net. */
const identityOf = (files: ReadonlyArray<string>): string =>
  files.map((file) => {
    try {
      const st = NodeFs.statSync(file, { bigint: true })
      return `${st.ino}:${st.size}:${st.mtimeNs}`
    } catch {
      return "-"
    }
  }).join("|")

/** A kernel watch of the directories of `files`, waking on any event that names one of them. */
const kernelWatch = (files: ReadonlyArray<string>): Stream.Stream<void, StoreFailure> =>
  Stream.asyncScoped<void, StoreFailure>((emit) =>
    Effect.acquireRelease(
      Effect.try({
        try: () => {
          const names = new Set(files.map((file) => NodePath.basename(file)))
          const dirs = [...new Set(files.map((file) => NodePath.dirname(file)))]
          const watchers = dirs.map((dir) =>
            NodeFs.watch(dir, { persistent: false }, (_event, name) => {
              if (name === null || names.has(String(name))) void emit.single(undefined)
            }).on("error", (cause) => void emit.fail(new StoreFailure({ method: "follow", cause, detail: "the watch failed" })))
          )
          // armed: a follower reads once more now
          void emit.single(undefined)
          return watchers
        },
        catch: (cause) => new StoreFailure({ method: "follow", cause, detail: "the watch could not be set up" })
      }),
      (watchers) => Effect.sync(() => watchers.forEach((w) => w.close()))
    ), { bufferSize: 1, strategy: "sliding" })

/** Wake-ups for a session kept in `files` (any of them may be created, replaced or removed). */
export const wakeups = (files: ReadonlyArray<string>): Stream.Stream<void, StoreFailure> =>
  Stream.merge(
    kernelWatch(files),
    Stream.suspend(() => {
      let last = identityOf(files)
      return Stream.tick(`${STAT_POLL_MILLIS} millis`).pipe(
        Stream.filter(() => {
          const now = identityOf(files)
          const changed = now !== last
          last = now
          return changed
        }),
        Stream.as(undefined)
      )
    })
  )

/** What identifies the content of the files in `dir`: each name with its identity, size and time. */
const directoryIdentity = (dir: string): string => {
  try {
    return NodeFs.readdirSync(dir).sort().map((name) => `${name}=${identityOf([NodePath.join(dir, name)])}`).join("|")
  } catch {
    return "-"
  }
}

/**
 * Wake-ups after any change to the files of the store's directory `dir` (`SessionStoreShape.changes`):
 * a kernel watch of the directory, any name (one at once, once armed), plus a `stat` poll of its
 * files every `STAT_POLL_MILLIS` as the safety net.
 */
export const storeWakeups = (dir: string): Stream.Stream<void, StoreFailure> =>
  Stream.merge(
    Stream.asyncScoped<void, StoreFailure>((emit) =>
      Effect.acquireRelease(
        Effect.try({
          try: () => {
            const watcher = NodeFs.watch(dir, { persistent: false }, () => void emit.single(undefined))
              .on("error", (cause) => void emit.fail(new StoreFailure({ method: "changes", cause, detail: "the watch failed" })))
            // armed: the watcher reads once more now
            void emit.single(undefined)
            return watcher
          },
          catch: (cause) => new StoreFailure({ method: "changes", cause, detail: "the watch could not be set up" })
        }),
        (watcher) => Effect.sync(() => watcher.close())
      ), { bufferSize: 1, strategy: "sliding" }),
    Stream.suspend(() => {
      let last = directoryIdentity(dir)
      return Stream.tick(`${STAT_POLL_MILLIS} millis`).pipe(
        Stream.filter(() => {
          const now = directoryIdentity(dir)
          const changed = now !== last
          last = now
          return changed
        }),
        Stream.as(undefined)
      )
    })
  )
