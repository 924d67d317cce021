/**
 * Large generated session logs for the resource and interrupt tests: a valid JSONL file of about
 * `events` events, written in 1 MiB pieces (never held whole).
 */
import * as fs from "node:fs"

const TEXT = "lorem ipsum dolor sit amet "

/**
 * A valid session log of about `events` events: turns of a user message, a streamed assistant
 * answer (block start, deltas, block end, finish) and its message citing the chunks.
 */
export const writeSession = (file: string, id: string, events: number): number => {
  const fd = fs.openSync(file, "w")
  let seq = 0
  let time = 1_700_000_000_000
  let buffer = JSON.stringify({ type: "session", version: 1, id, createdAt: time }) + "\n"
  const put = (type: string, data: unknown, extra: Record<string, unknown> = {}) => {
    buffer += JSON.stringify({ type, seq, time: time++, data, ...extra }) + "\n"
    seq++
    if (buffer.length > 1 << 20) {
      fs.writeSync(fd, buffer)
      buffer = ""
    }
  }
  for (let turn = 1; seq < events; turn++) {
    put("turn/start", { turn })
    put("step/start", { turn, step: 1 })
    put("user/message", { id: `u${turn}`, role: "user", content: [{ type: "text", text: `question ${turn}` }], source: { kind: "user" } }, {
      surfaceOp: "append"
    })
    const first = seq
    put("assistant/chunk", { turn, step: 1, chunk: { type: "block-start", index: 0, blockType: "text" } })
    for (let d = 0; d < 8; d++) put("assistant/chunk", { turn, step: 1, chunk: { type: "text-delta", index: 0, delta: TEXT } })
    put("assistant/chunk", { turn, step: 1, chunk: { type: "block-end", index: 0, block: { type: "text", text: TEXT.repeat(8) } } })
    put("assistant/chunk", { turn, step: 1, chunk: { type: "finish", reason: { kind: "stop" } } })
    const cited = Array.from({ length: seq - first }, (_, i) => first + i)
    put("assistant/message", {
      turn,
      step: 1,
      message: {
        id: `a${turn}`,
        role: "assistant",
        content: [{ type: "text", text: TEXT.repeat(8) }],
        source: { kind: "model", provider: "p", model: "m" }
      }
    }, { sourceEventSeqs: cited, surfaceOp: "append" })
    put("step/end", { turn, step: 1 })
    put("turn/end", { turn, reason: { kind: "completed" } })
  }
  fs.writeSync(fd, buffer)
  fs.closeSync(fd)
  return seq
}

