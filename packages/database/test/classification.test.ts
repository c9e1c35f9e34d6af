import { describe, expect, it } from "@effect/vitest"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit } from "effect"
import * as DurableWriter from "@baton/database/DurableWriter"
import { driverError, sqlError } from "./support/sqlErrors.js"

const wrap = (error: unknown, times: number): unknown => {
  let current = error
  for (let i = 0; i < times; i++) current = { _tag: `Wrapper${i}`, code: "sink_failed", cause: current }
  return current
}

describe("DatabaseError classification", () => {
  const table: ReadonlyArray<readonly [string | undefined, string, DurableWriter.DatabaseErrorCode]> = [
    ["SQLITE_BUSY", "", "busy"],
    ["SQLITE_BUSY_SNAPSHOT", "", "busy"],
    ["SQLITE_LOCKED_SHAREDCACHE", "", "busy"],
    ["40001", "", "busy"],
    ["40P01", "", "busy"],
    ["55P03", "", "busy"],
    ["SQLITE_CONSTRAINT_TRIGGER", "", "constraint"],
    ["SQLITE_MISMATCH", "", "constraint"],
    ["SQLITE_TOOBIG", "", "constraint"],
    ["23514", "", "constraint"],
    ["22P02", "", "constraint"],
    ["22021", "", "constraint"],
    ["SQLITE_READONLY_DBMOVED", "", "read_only"],
    ["SQLITE_NOTADB", "", "corrupt"],
    ["XX001", "", "corrupt"],
    ["SQLITE_NOMEM", "", "full"],
    ["53100", "", "full"],
    ["SQLITE_CANTOPEN", "", "io"],
    ["SQLITE_PROTOCOL", "", "io"],
    ["08006", "", "io"],
    ["57P01", "", "io"],
    ["58030", "", "io"],
    ["25P03", "", "io"],
    ["57P05", "", "io"],
    ["ECONNRESET", "", "io"],
    ["EPIPE", "", "io"],
    ["42703", "", "schema"],
    ["SQLITE_ERROR", "no such table: runs", "schema"],
    ["SQLITE_ERROR", "no such column: x", "schema"],
    ["SQLITE_ERROR", "near \"SELEC\": syntax error", "unknown"],
    ["25P02", "", "unknown"],
    ["42601", "", "unknown"],
    [undefined, "database is locked", "busy"],
    [undefined, "Could not serialize access due to concurrent update", "busy"],
    // node-postgres' pool found no free connection in time: contention, no statement ran.
    [undefined, "timeout exceeded when trying to connect", "busy"],
    [undefined, "attempt to write a readonly database", "read_only"],
    [undefined, "database disk image is malformed", "corrupt"],
    [undefined, "database or disk is full", "full"],
    [undefined, "Connection terminated unexpectedly", "io"],
    [undefined, "Client has encountered a connection error and is not queryable", "io"],
    [undefined, "something else", "unknown"]
  ]
  for (const [code, message, expected] of table) {
    it(`${code ?? "no code"} ${message} → ${expected}`, () => {
      const error = sqlError(code, message.length > 0 ? message : undefined)
      expect(DurableWriter.codeOf(error)).toBe(expected)
      const normalized = DurableWriter.fromSqlError(error)
      expect(normalized.code).toBe(expected)
      expect(normalized.cause).toBe(error)
      expect(normalized.retryable).toBe(expected === "busy")
      expect(DurableWriter.isRetryable(error)).toBe(expected === "busy")
    })
  }

  it("a driver code wins over its message", () => {
    expect(DurableWriter.codeOf(sqlError("SQLITE_CONSTRAINT_UNIQUE", "database is locked"))).toBe("constraint")
  })

  it("a hard failure anywhere in the chain vetoes busy", () => {
    expect(DurableWriter.codeOf(sqlError("SQLITE_BUSY", "busy", driverError("SQLITE_CORRUPT")))).toBe("corrupt")
    expect(DurableWriter.codeOf(sqlError("SQLITE_IOERR", "io", driverError("SQLITE_BUSY")))).toBe("io")
  })

  it("codeOf follows 8 domain wrappers and ignores their own codes", () => {
    expect(DurableWriter.codeOf(wrap(sqlError("SQLITE_BUSY"), 8))).toBe("busy")
    expect(DurableWriter.codeOf(wrap(new DurableWriter.DatabaseError({ code: "constraint" }), 8))).toBe("constraint")
    expect(DurableWriter.isRetryable(wrap(new DurableWriter.DatabaseError({ code: "busy" }), 8))).toBe(true)
  })

  it("codeOf returns undefined without SQL provenance", () => {
    expect(DurableWriter.codeOf(new Error("database is locked"))).toBeUndefined()
    expect(DurableWriter.codeOf(driverError("SQLITE_BUSY"))).toBeUndefined()
    expect(DurableWriter.codeOf(wrap(new Error("deadlock detected"), 3))).toBeUndefined()
    expect(DurableWriter.codeOf(undefined)).toBeUndefined()
    expect(DurableWriter.codeOf("SQLITE_BUSY")).toBeUndefined()
    expect(DurableWriter.isRetryable(new Error("database is locked"))).toBe(false)
  })

  it("an SqlError without a driver cause is unknown", () => {
    expect(DurableWriter.codeOf(new SqlError({ message: "x" }))).toBe("unknown")
  })

  it("codeOf is cycle-safe and stops at a throwing getter", () => {
    const cyclic: { _tag: string; cause?: unknown } = { _tag: "Loop" }
    cyclic.cause = { _tag: "SqlError", cause: cyclic }
    expect(DurableWriter.codeOf(cyclic)).toBe("unknown")
    const hostile = new SqlError({
      cause: Object.defineProperty({}, "code", {
        get() {
          throw new Error("boom")
        }
      })
    })
    expect(DurableWriter.codeOf(hostile)).toBe("unknown")
    const long = wrap(sqlError("SQLITE_BUSY"), 20)
    expect(DurableWriter.codeOf(long)).toBeUndefined()
  })

  it("messages are fixed per code and redact drops the cause", () => {
    const error = DurableWriter.fromSqlError(sqlError("23505", "duplicate key value violates unique constraint \"secret_idx\""))
    expect(error.message).toBe("the database refused the row: a constraint or data check failed")
    expect(new DurableWriter.DatabaseError({ code: "busy" }).message).toBe(
      "database busy: another writer holds the lock or a serialization conflict occurred"
    )
    const redacted = DurableWriter.redact(error)
    expect(redacted.code).toBe("constraint")
    expect(redacted.cause).toBeUndefined()
    expect(redacted._tag).toBe("@baton/database/DatabaseError")
  })
})

describe("affectedRows", () => {
  it.effect("reads better-sqlite3 and node-postgres results", () =>
    Effect.gen(function*() {
      expect(yield* DurableWriter.affectedRows({ changes: 3, lastInsertRowid: 9 })).toBe(3)
      expect(yield* DurableWriter.affectedRows({ changes: 2n })).toBe(2)
      expect(yield* DurableWriter.affectedRows({ rowCount: 0, rows: [] })).toBe(0)
    }))

  it.effect("refuses anything else with unsupported, describing only the shape", () =>
    Effect.gen(function*() {
      let invoked = false
      const accessor = Object.defineProperty({}, "changes", {
        get() {
          invoked = true
          return 1
        },
        enumerable: true
      })
      for (const raw of [undefined, null, 5, [], { changes: -1 }, { changes: 1.5 }, { rowCount: "3" }, { changes: 2n ** 60n }, accessor, { secret: "value" }]) {
        const exit = yield* Effect.exit(DurableWriter.affectedRows(raw))
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) {
          const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
          expect(error?.code).toBe("unsupported")
          expect(String((error?.cause as Error).message)).not.toContain("value\"")
        }
      }
      expect(invoked).toBe(false)
    }))
})
