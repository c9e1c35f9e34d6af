import * as Redaction from "@baton/journal/Redaction"
import { describe, expect, it } from "@effect/vitest"
import { encode } from "../src/internal/canonical.js"

const ghp = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"

describe("Redaction (check 3)", () => {
  const sample = {
    token: ghp,
    note: "Bearer abcdef.ghi",
    inputTokens: 42,
    idempotencyKey: "k1",
    url: "postgres://u:pw@h/db"
  }

  it("redacts sensitive members and secrets in strings, keeps counts and ordinary keys", () => {
    expect(Redaction.redact(sample)).toEqual({
      token: "[REDACTED]",
      note: "Bearer [REDACTED_TOKEN]",
      inputTokens: 42,
      idempotencyKey: "k1",
      url: "postgres://u:[REDACTED]@h/db"
    })
  })

  it("is a fixed point", () => {
    const values: Array<unknown> = [
      sample,
      { text: `API_KEY = "abc def" and password: hunter2; session=xyz, cookie=c1 {"apiKey": "v"}` },
      { jwt: "prefix eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl" },
      { block: "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----" },
      { "Bearer abcdefgh": 1, nested: [{ secret: { a: 1 } }, "sk-abc1234567890", "AKIAABCDEFGHIJKLMNOP"] }
    ]
    for (const value of values) {
      const once = Redaction.redact(value)
      expect(Redaction.redact(once)).toEqual(once)
    }
  })

  it("keeps token counts, refuses non-count token values", () => {
    expect(Redaction.redact({ budget: { tokens: 1000 } })).toEqual({ budget: { tokens: 1000 } })
    expect(Redaction.redact({ tokens: "abc" })).toEqual({ tokens: "[REDACTED]" })
    expect(Redaction.redact({ tokens: -1 })).toEqual({ tokens: "[REDACTED]" })
  })

  it("matches key suffixes, not substrings", () => {
    for (const key of ["key", "api_key", "x-api-key", "apiKey", "password", "sessions", "oauth", "secretAccessKey"]) {
      expect(Redaction.isSensitiveKey(key), key).toBe(true)
    }
    for (
      const key of [
        "passwd", "db_passwd", "pwd", "userPwd", "pass", "smtp-pass", "DB_PASS", "api_key", "apikey", "access_token",
        "refresh_token", "private_key", "client_secret", "authorization", "cookie", "session", "accessToken"
      ]
    ) {
      expect(Redaction.isSensitiveKey(key), key).toBe(true)
    }
    for (
      const key of [
        "idempotencyKey", "tokenizer", "secretary", "monkey", "tokenId", "publicKeyId", "author", "bypass", "compass",
        "passage", "passes", "password_hint_shown", "passenger"
      ]
    ) {
      expect(Redaction.isSensitiveKey(key), key).toBe(false)
    }
  })

  it("applies every textual rule", () => {
    const cases: Array<[string, string]> = [
      ["Basic dXNlcjpwYXNz", "Basic [REDACTED_TOKEN]"],
      ["x eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", "x [REDACTED_TOKEN]"],
      ["k sk-abc1234567890", "k [REDACTED_API_KEY]"],
      ["risk-abc1234567890", "risk-abc1234567890"],
      ["github_pat_ABCDEFGHIJKLMNOPQRSTUV", "[REDACTED]"],
      ["AKIAABCDEFGHIJKLMNOP", "[REDACTED]"],
      ["xoxb-1234567890-abc", "[REDACTED]"],
      ["AIza" + "A".repeat(35), "[REDACTED]"],
      ["DB_PASSWORD='s3cr3t' next", "DB_PASSWORD=[REDACTED] next"],
      ["session=abc; path=/", "session=[REDACTED]; path=/"],
      [`{"clientSecret": "v"}`, `{"clientSecret": "[REDACTED]"}`],
      ["-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY----- tail", "[REDACTED] tail"]
    ]
    for (const [input, expected] of cases) expect(Redaction.redact(input), input).toBe(expected)
  })

  it("replaces a key changed by a textual rule and walks special values", () => {
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic["self"] = cyclic
    const result = Redaction.redact({
      "Bearer abcdefgh": 1,
      fn: () => 1,
      sym: Symbol("s"),
      when: new Date(0),
      cyclic,
      bytes: new Uint8Array(3),
      proxied: new Proxy(new Uint8Array(2), {})
    }) as Record<string, unknown>
    expect(result["[REDACTED]"]).toBe(1)
    expect(result["fn"]).toBe(Redaction.functionMarker)
    expect(result["sym"]).toBe(Redaction.symbolMarker)
    expect(result["when"]).toBe("1970-01-01T00:00:00.000Z")
    expect(result["cyclic"]).toEqual({ a: 1, self: Redaction.circularMarker })
    expect(result["bytes"]).toEqual({ [Redaction.binaryMarker]: "Uint8Array 3 bytes" })
    expect((result["proxied"] as Record<string, unknown>)[Redaction.binaryMarker]).toMatch(/^Uint8Array /)
  })

  it("keeps __proto__ as data", () => {
    const value = JSON.parse(`{"__proto__": {"password": "x"}, "a": 1}`)
    const result = Redaction.redact(value) as Record<string, unknown>
    expect(Object.getPrototypeOf(result)).toBe(Object.prototype)
    expect(Object.keys(result)).toEqual(["__proto__", "a"])
    expect(Object.getOwnPropertyDescriptor(result, "__proto__")?.value).toEqual({ password: "[REDACTED]" })
  })

  it("throws past the depth limit unless asked to name it", () => {
    let deep: unknown = 1
    for (let i = 0; i < 300; i++) deep = { d: deep }
    expect(() => Redaction.redact(deep)).toThrow()
    expect(JSON.stringify(Redaction.redact(deep, { onTooDeep: "name" }))).toContain(Redaction.depthMarker)
  })

  it("redactJsonString never returns secrets and leaves unparseable text alone", () => {
    expect(Redaction.redactJsonString(`{"password":"p"}`, Redaction.make())).toBe(`{"password":"[REDACTED]"}`)
    expect(Redaction.redactJsonString("not json", Redaction.make())).toBe("not json")
    expect(Redaction.redactJsonString(`{"a":1}`, () => {
      throw new Error("x")
    })).toBe(`"[REDACTED]"`)
    expect(Redaction.makeNoop()(sample)).toBe(sample)
  })

  it("runs in linear time on hostile input", () => {
    const hostile = [
      "a".repeat(200_000),
      "\"".repeat(100_000),
      "key".repeat(60_000),
      "-----BEGIN PRIVATE KEY-----".repeat(5_000),
      "x://" + "u".repeat(100_000)
    ]
    for (const text of hostile) expect(typeof Redaction.redact(text)).toBe("string")
  })

  it("stores every control event kind byte-identical to its canonical JSON", () => {
    const principal = { id: "local/operator", kind: "agent", stampedAt: 1_700_000_000_000 }
    const envelope = { capabilities: ["process:spawn"], flows: ["F"], budget: { tokens: 1000, milliseconds: 5000, deadline: 1_700_000_999_000 }, host: "h1" }
    const digest = "3f7a9c1e5b2d4f6a8c0e1b3d5f7a9c1e5b2d4f6a8c0e1b3d5f7a9c1e5b2d4f6a"
    const planTarget = { _tag: "Plan", planId: "plan-1", digest, envelope }
    const nodeTarget = { _tag: "Node", runId: "run-1", requestId: "req-1", digest, envelope }
    const payloads: Array<unknown> = [
      { planId: "plan-1", flowId: "F", digest },
      { tokenId: "tok-1", approvalTarget: planTarget, target: "Plan", scope: "run", envelope, principal, reason: "looks fine" },
      { tokenId: "tok-2", approvalTarget: nodeTarget, target: "Node", scope: "once", envelope, principal },
      { decision: "approved", principal, scope: "remembered", target: nodeTarget },
      { runId: "run-1", planId: "plan-1", digest, status: "accepted", trigger: "manual" },
      { runId: "run-1", status: "running" },
      { runId: "run-1", status: "pending" },
      { runId: "run-1", status: "failed", cause: "launch failed: no body registered for flow F" },
      { runId: "run-1", status: "cancelled" },
      { runId: "run-1", status: "completed" },
      { runId: "run-1" },
      { runId: "run-1", status: "accepted", principal, reason: "operator resume", handedTo: { hostId: "h", pid: 10 } },
      { runId: "run-1", source: "control", principal, reason: "stop" },
      { commandId: "cmd-1", runId: "run-1", name: "go" },
      { runId: "run-1", messageId: "msg-1", kind: "steer", createdAt: 1_700_000_000_000 },
      { runId: "run-1", messageId: "msg-1", status: "accepted" }
    ]
    for (const payload of payloads) {
      const plain = encode(payload)
      const redacted = encode(Redaction.redact(payload))
      expect(redacted).toEqual(plain)
    }
  })
})
