/**
 * The user-role side of turning log messages into an `@effect/ai` Prompt, shared by the request
 * conversion (`PromptConversion.requestToPrompt`) and the chat layer's exact inverse
 * (`ChatPrompt`): the parts of one user-role message become Prompt messages in order, each run of
 * tool results a `tool` message and each run of other parts a `user` message. Internal.
 *
 * @since 0.2.0
 */
import * as Prompt from "@effect/ai/Prompt"

/**
 * Push the Prompt messages of one user-role message's parts onto `out`: runs of tool results as
 * `tool` messages (with `toolOptions`, or none), other runs as `user` messages (with `options`).
 *
 * @since 0.2.0
 * @category utils
 */
export const pushUserRuns = (
  out: Array<Prompt.Message>,
  parts: ReadonlyArray<Prompt.UserMessagePart | Prompt.ToolResultPart>,
  options: Prompt.ProviderOptions,
  toolOptions: Prompt.ProviderOptions | undefined
): void => {
  let userRun: Array<Prompt.UserMessagePart> = []
  let toolRun: Array<Prompt.ToolResultPart> = []
  const flushUser = () => {
    if (userRun.length > 0) out.push(Prompt.makeMessage("user", { content: userRun, options }))
    userRun = []
  }
  const flushTool = () => {
    if (toolRun.length > 0) {
      out.push(Prompt.makeMessage("tool", toolOptions === undefined ? { content: toolRun } : { content: toolRun, options: toolOptions }))
    }
    toolRun = []
  }
  for (const part of parts) {
    if (part.type === "tool-result") {
      flushUser()
      toolRun.push(part)
    } else {
      flushTool()
      userRun.push(part)
    }
  }
  flushUser()
  flushTool()
}
