/** Credential-shaped sample values and an emit on both channels. */
import { Journal } from "@baton/journal/Journal"
import { Effect } from "effect"

export const secrets = {
  github: "ghp_" + "Zq8Xw2Lm4Np6Rt0Vy3Bc5Df7Gh9Jk1Ms2Qa4",
  password: "hunter2-correct-horse",
  bearer: "abcDEF123456.ghiJKL789",
  apiKey: "sk-live9f8e7d6c5b4a3210"
}

export const payload = {
  token: secrets.github,
  dsn: `postgres://app:${secrets.password}@db.internal/app`,
  note: `Authorization: Bearer ${secrets.bearer}`,
  nested: [{ text: `key ${secrets.apiKey} used` }]
}

export const emitBoth = Effect.gen(function*() {
  const journal = yield* Journal
  yield* journal.emitDurableUnfenced({ runId: "r", sourceId: "s", eventType: "x", payload, meta: { auth: secrets.password } })
  yield* journal.emitLossy({ runId: "r", sourceId: "s", eventType: "x", payload })
  yield* journal.flush
})

