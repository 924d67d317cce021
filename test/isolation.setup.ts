/**
 * Set-up run before every test file of `npm test`, whose workers run file after file without
 * reloading the modules they share (vitest.config.ts: `isolate: false`).
 *
 * `@effect/vitest`'s `layer(...)` (and `it.layer`) hands its block an `it` whose `effect` and
 * `scoped` run on the layer's runtime, and it makes that `it` by assigning those methods onto the
 * one `it` every file imports. In a fresh module graph per file that stays within the file; in a
 * shared one the next file's `it.effect` would run on a closed layer without the test services
 * (no TestClock). The first set-up of a worker keeps the pristine methods; each later one puts
 * them back, so every file starts with the `it` it would have in a fresh process.
 */
import { it } from "@effect/vitest"

const KEY = Symbol.for("effect-session-log/test/pristine-it")
const holder = globalThis as { [KEY]?: Record<string, unknown> }
const pristine = holder[KEY] ??= { ...it }
Object.assign(it, pristine)
