import * as JournalEvent from "@baton/journal/JournalEvent"
import * as OwnerId from "@baton/journal/OwnerId"
import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { encode } from "../src/internal/canonical.js"

describe("JournalEvent", () => {
  it("identifiers refuse empty, oversized, NUL and unpaired surrogates", () => {
    const decode = Schema.decodeUnknownEither(JournalEvent.Identifier)
    expect(Either.isRight(decode("a".repeat(1024)))).toBe(true)
    expect(Either.isRight(decode("ok\uD83D\uDE00"))).toBe(true)
    for (const bad of ["", "a".repeat(1025), "a\u0000b", "\uD800", "x\uDC00"]) {
      expect(Either.isLeft(decode(bad)), JSON.stringify(bad)).toBe(true)
    }
  })

  it("sequence numbers are non-negative safe integers below MAX_SAFE_INTEGER", () => {
    const decode = Schema.decodeUnknownEither(JournalEvent.Seq)
    expect(Either.isRight(decode(0))).toBe(true)
    expect(Either.isRight(decode(Number.MAX_SAFE_INTEGER - 1))).toBe(true)
    for (const bad of [-1, 1.5, Number.MAX_SAFE_INTEGER, Number.NaN]) expect(Either.isLeft(decode(bad))).toBe(true)
  })

  it("makeEventId is injective across separator-bearing ids", () => {
    const a = JournalEvent.makeEventId("r:1", "s", 0)
    const b = JournalEvent.makeEventId("r", "1:s", 0)
    expect(a).not.toBe(b)
    expect(JournalEvent.makeEventId("r", "s", 7)).toBe("ev:1:r:1:s:7")
  })

  it("companion ids are prefixed, bounded and validated", () => {
    const id = JournalEvent.companionRunId("run-store", "x".repeat(1024))
    expect(id.length).toBeLessThanOrEqual(1024)
    expect(JournalEvent.isCompanionRunId(id)).toBe(true)
    expect(JournalEvent.isCompanionRunId("r")).toBe(false)
    expect(id).toBe(JournalEvent.companionRunId("run-store", "x".repeat(1024)))
    expect(() => JournalEvent.companionRunId("Bad Stream", "r")).toThrow()
  })

  it("owner ids need identifiers and a non-negative safe pid", () => {
    const decode = Schema.decodeUnknownEither(OwnerId.OwnerId)
    expect(Either.isRight(decode({ hostId: "h", pid: 0, nonce: "n" }))).toBe(true)
    expect(Either.isLeft(decode({ hostId: "h", pid: -1, nonce: "n" }))).toBe(true)
    expect(Either.isLeft(decode({ hostId: "", pid: 1, nonce: "n" }))).toBe(true)
  })

  it("payload schemas decode control's payloads and ignore unknown members", () => {
    const fork = Schema.decodeUnknownSync(JournalEvent.ForkCreatedPayload)({
      parentRunId: "p",
      forkJournalOffset: 3,
      childRunId: "c",
      extra: true
    })
    expect(fork).toEqual({ parentRunId: "p", forkJournalOffset: 3, childRunId: "c" })
    expect(Schema.decodeUnknownSync(JournalEvent.EngineInterruptedPayload)({ outcome: "cancelled" })).toEqual({
      outcome: "cancelled"
    })
  })
})

describe("canonical JSON", () => {
  it("follows JSON.stringify semantics with sorted keys", () => {
    expect(encode({ b: 1, a: [undefined, () => 1, Number.NaN], c: undefined, "10": 1, "2": 2 })).toEqual(
      Either.right(`{"10":1,"2":2,"a":[null,null,null],"b":1}`)
    )
  })

  it("refuses what cannot be stored the same way everywhere", () => {
    for (const bad of [undefined, 1n, new Map(), { a: "x\u0000y" }, { "\uD800": 1 }]) {
      expect(Either.isLeft(encode(bad))).toBe(true)
    }
  })
})
