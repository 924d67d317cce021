/**
 * The ACP adapter's mode catalog (docs/acp.md §2.4): the available modes, how each composes the system
 * prompt and the tools offered, the durable log-only `acp/mode` event a switch appends (ignorable,
 * so the log stays readable under K7), its fold, and the mode both ways ACP shows it: as session
 * modes and as the `mode` select config option.
 */
import type * as acp from "@agentclientprotocol/sdk"
import type { Event } from "../../schema/Events.js"
import type { Composition } from "../agent/TurnTypes.js"

/** One mode of the catalog. */
export interface AcpMode {
  readonly id: string
  readonly name: string
  readonly description?: string
  /** Appended to the base system prompt (separated by a blank line) while the mode is active. */
  readonly systemSection?: string
  /** The tools offered in this mode, by name (default: all of the toolkit's). */
  readonly tools?: ReadonlyArray<string>
}

/** The log-only event of a mode switch; `data = { modeId }`, appended with `ignorable: true`. */
export const MODE_EVENT = "acp/mode"

/** The id of the config option that mirrors the mode. */
export const MODE_CONFIG_ID = "mode"

/** The default catalog: `code` (everything) and `plan` (read-only tools and a plan section). */
export const defaultModes = (readOnlyTools: ReadonlyArray<string>): ReadonlyArray<AcpMode> => [
  { id: "code", name: "Code", description: "Read and change the workspace" },
  {
    id: "plan",
    name: "Plan",
    description: "Read only: investigate and propose a plan",
    systemSection: "You are in plan mode: read and investigate, propose a plan, change nothing.",
    tools: readOnlyTools
  }
]

/** The mode in force after `events`: the last valid `acp/mode`, else the catalog's first mode. */
export const foldMode = (events: ReadonlyArray<Event>, modes: ReadonlyArray<AcpMode>): string => {
  let current = modes[0]!.id
  for (const e of events) {
    if (e.type !== MODE_EVENT) continue
    const id = (e.data as { readonly modeId?: unknown } | null)?.modeId
    if (typeof id === "string" && modes.some((m) => m.id === id)) current = id
  }
  return current
}

/** The composition of the next request in `modeId`. */
export const composition = (system: string, modes: ReadonlyArray<AcpMode>, modeId: string): Composition => {
  const mode = modes.find((m) => m.id === modeId) ?? modes[0]!
  return {
    system: mode.systemSection === undefined ? system : `${system}\n\n${mode.systemSection}`,
    ...(mode.tools === undefined ? {} : { tools: mode.tools })
  }
}

/** The modes as ACP session modes. */
export const modeState = (modes: ReadonlyArray<AcpMode>, current: string): acp.SessionModeState => ({
  currentModeId: current,
  availableModes: modes.map((m) => ({
    id: m.id,
    name: m.name,
    ...(m.description === undefined ? {} : { description: m.description })
  }))
})

/** The modes as the `mode` select config option. */
export const configOptions = (modes: ReadonlyArray<AcpMode>, current: string): Array<acp.SessionConfigOption> => [{
  id: MODE_CONFIG_ID,
  name: "Mode",
  category: "mode",
  type: "select",
  currentValue: current,
  options: modes.map((m) => ({
    value: m.id,
    name: m.name,
    ...(m.description === undefined ? {} : { description: m.description })
  }))
}]
