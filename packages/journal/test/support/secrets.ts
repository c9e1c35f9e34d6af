/** Credential-shaped sample values and an emit on both channels. */
import { Journal } from "@baton/journal/Journal"
import { Effect } from "effect"

export const secrets = {
  github: "ghp_" + "Zq8Xw2Lm4Np6Rt0Vy3Bc5Df7Gh9Jk1Ms2Qa4",
  password: "hunter2-correct-horse",
  bearer: "abcDEF123456.ghiJKL789",
  apiKey: "sk-live9f8e7d6c5b4a3210",
  // Plain words no textual rule recognizes: only the member name marks them secret.
  passwd: "plainvalue-passwd-31",
  pwd: "plainvalue-pwd-32",
  pass: "plainvalue-pass-33",
  apiKeySnake: "plainvalue-api-key-34",
  apikey: "plainvalue-apikey-35",
  accessToken: "plainvalue-access-36",
  refreshToken: "plainvalue-refresh-37",
  privateKey: "plainvalue-private-38",
  clientSecret: "plainvalue-client-39",
  authorization: "plainvalue-authz-40",
  cookie: "plainvalue-cookie-41",
  session: "plainvalue-session-42"
}

/** Members whose value is a secret because of their name alone. */
export const credentialMembers = {
  passwd: secrets.passwd,
  db_pwd: secrets.pwd,
  "smtp-pass": secrets.pass,
  api_key: secrets.apiKeySnake,
  apikey: secrets.apikey,
  access_token: secrets.accessToken,
  refresh_token: secrets.refreshToken,
  private_key: secrets.privateKey,
  client_secret: secrets.clientSecret,
  Authorization: secrets.authorization,
  cookie: secrets.cookie,
  session: secrets.session
}

export const payload = {
  token: secrets.github,
  dsn: `postgres://app:${secrets.password}@db.internal/app`,
  note: `Authorization: Bearer ${secrets.bearer}`,
  nested: [{ text: `key ${secrets.apiKey} used` }],
  // Not named `credentials`: that name alone would redact the whole object.
  login: credentialMembers,
  // A token count is not a secret (journal.md 6, control's envelope.budget.tokens).
  budget: { tokens: 1000 }
}

export const emitBoth = Effect.gen(function*() {
  const journal = yield* Journal
  yield* journal.emitDurableUnfenced({ runId: "r", sourceId: "s", eventType: "x", payload, meta: { auth: secrets.password } })
  yield* journal.emitLossy({ runId: "r", sourceId: "s", eventType: "x", payload })
  yield* journal.flush
})

