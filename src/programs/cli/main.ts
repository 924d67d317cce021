/**
 * The one runtime edge: parses `process.argv`, runs the `session-log` command with the Node
 * platform layers, and exits with the code the command's result carries (0, 1 or 2), or 130 / 143
 * when SIGINT / SIGTERM interrupted it (the shell's 128 + signal number).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import { main } from "./Commands.js"

// logs (e.g. a skipped unreadable file) go to stderr: stdout carries the one JSON document
const logToStderr = Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true }))

// argument errors are exit 2 (with --json one UsageError document on stdout), see `main`
const program = main(process.argv).pipe(
  Effect.provide(Layer.merge(NodeContext.layer, logToStderr))
)

// the first SIGINT/SIGTERM interrupts the command (runMain), which cleans up and exits; a second
// one ends the process at once, even when the first could not (an open(2) that blocks)
let signalled = 0
let signalCode: number | undefined
for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
  process.on(signal, () => {
    signalCode ??= code
    if (++signalled > 1) process.exit(code)
  })
}

/**
 * Exit once stdout and stderr have handed every queued write to the system, or are closed or
 * broken: a pipe whose reader is slower than the command queues what does not fit, and exiting
 * at once would drop the end of the output (of a successful command as of a failing one).
 */
const exitWhenFlushed = (code: number, onExit: (code: number) => void): void => {
  const pending = [process.stdout, process.stderr].filter((s) => s.writableLength > 0 && !s.destroyed)
  let left = pending.length
  if (left === 0) return onExit(code)
  for (const stream of pending) {
    let done = false
    const settled = () => {
      if (done) return
      done = true
      stream.off("drain", settled).off("error", settled).off("close", settled)
      if (--left === 0) onExit(code)
    }
    stream.on("drain", settled).on("error", settled).on("close", settled)
  }
}

NodeRuntime.runMain(program, {
  disableErrorReporting: false,
  disablePrettyLogger: true,
  // the program's result is the exit code; an interruption by a signal is 128 + its number; a
  // defect (not an expected failure) is 2
  teardown: (exit, onExit) =>
    exitWhenFlushed(
      Exit.isSuccess(exit) && typeof exit.value === "number"
        ? exit.value
        : Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause) && signalCode !== undefined
        ? signalCode
        : 2,
      onExit
    )
})
