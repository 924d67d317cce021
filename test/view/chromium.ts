/**
 * Headless Chromium for the viewer's browser tests: Debian's `chromium` (/usr/bin/chromium, or
 * SESSION_LOG_CHROMIUM), driven by playwright-core; no browser is ever downloaded. Where there is
 * none the tests are skipped under a name that says why, and fail instead when CI=true (as
 * SESSION_LOG_REQUIRE_PG does for PostgreSQL). Screenshots go to test-artifacts/screenshots/view/.
 */
import { describe } from "@effect/vitest"
import { existsSync, mkdirSync } from "node:fs"
import { join, resolve } from "node:path"
import { type Browser, chromium } from "playwright-core"

export const CHROMIUM = process.env.SESSION_LOG_CHROMIUM ?? "/usr/bin/chromium"

const available = existsSync(CHROMIUM)
const reason = `no Chromium at ${CHROMIUM}: apt-get install chromium, or set SESSION_LOG_CHROMIUM`

if (!available && process.env.CI === "true") {
  throw new Error(`CI=true but the browser tests cannot run: ${reason}`)
}

/** `describe` where Chromium is available; elsewhere a skipped block whose name gives the reason. */
export const describeBrowser = (name: string, body: () => void): void => {
  if (available) describe(name, body)
  else describe.skip(`${name} [SKIPPED: ${reason}]`, body)
}

/** Chromium, headless, with the flags that keep it from reaching for a (closed) network. */
export const launch = (): Promise<Browser> =>
  chromium.launch({
    executablePath: CHROMIUM,
    // playwright-core gives each launch a fresh temporary profile (--user-data-dir)
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })

/** The directory the screenshots of this run go to (created). */
export const screenshotDir = (): string => {
  const dir = resolve(import.meta.dirname, "../../test-artifacts/screenshots/view")
  mkdirSync(dir, { recursive: true })
  return dir
}

/** Where one scenario's screenshot goes. */
export const screenshotPath = (name: string): string => join(screenshotDir(), `${name}.png`)
