#!/usr/bin/env node
// The `session-log` CLI: runs the TypeScript sources through tsx's loader (no build step).
import { register } from "tsx/esm/api"

register()
await import("../src/programs/cli/main.ts")
