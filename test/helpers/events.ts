/**
 * Event data the tests build again and again: a text content array, a user message and a
 * `todo/write` payload. Each test file imports these instead of defining its own copy.
 */

/** The content of a message holding one text block. */
export const textContent = (text: string) => [{ type: "text" as const, text }]

/** The data of a `user/message` typed by a person: one text block (the id itself by default). */
export const userMessage = (id: string, text: string = id) => ({
  id,
  role: "user" as const,
  content: textContent(text),
  source: { kind: "user" }
})

/** The data of a `todo/write` with one pending item `t<n>`. */
export const todo = (n: number) => ({ todos: [{ content: `t${n}`, status: "pending" as const }] })
