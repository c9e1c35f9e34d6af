/**
 * A host's presence row follows its clock: written at start, refreshed every 10 s (not on each sweep, so
 * an idle host stays cheap), and deleted when the host's scope closes. Driven by TestClock.
 */
import * as HostPresence from "@baton/control/HostPresence"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Option, Schema, Scope, TestClock, TestServices } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { tempDb } from "./fixtures/runtimeProcesses.js"

const idle = Flow.make({ id: "presence.idle", description: "never launched", version: "7", input: Schema.Unknown, handler: () => Effect.succeed(1) })

const start = 1_800_000_000_000

describe("runtime: host presence", () => {
  it.scoped("a host refreshes its presence row every 10 s of its clock, not on each sweep, and deletes it when it stops", () =>
    Effect.gen(function*() {
      const { filename } = tempDb()
      yield* TestClock.setTime(start)
      const hostScope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(NodeRuntime.layer({ filename, flows: [idle], pollInterval: "1 second" }), hostScope)
      const rows = HostPresence.live(start).pipe(Effect.map(Option.getOrThrow), Effect.provide(context))
      // Waits in real time for the host's forked writes to land; the host's own time is the TestClock's.
      const eventually = (check: (seen: ReadonlyArray<HostPresence.Presence>) => boolean) =>
        Effect.gen(function*() {
          for (let i = 0; i < 500; i++) {
            const seen = yield* rows
            if (check(seen)) return seen
            yield* TestServices.provideLive(Effect.sleep("20 millis"))
          }
          return yield* Effect.dieMessage("the presence row never reached the expected state")
        })

      const first = yield* rows
      expect(first).toHaveLength(1)
      expect(first[0]).toMatchObject({ pid: process.pid, flows: [{ flowId: "presence.idle", version: "7" }], startedAtMs: start, seenAtMs: start })

      // Nine sweeps later the row is as written at start.
      for (let s = 0; s < 9; s++) yield* TestClock.adjust("1 second")
      yield* TestServices.provideLive(Effect.sleep("200 millis"))
      expect((yield* rows)[0]!.seenAtMs).toBe(start)

      yield* TestClock.adjust("1 second")
      const refreshed = yield* eventually((seen) => seen[0]?.seenAtMs === start + 10_000)
      expect(refreshed[0]!.startedAtMs).toBe(start)

      yield* Scope.close(hostScope, Exit.void)
      const after = yield* HostPresence.live(start).pipe(
        Effect.map(Option.getOrThrow),
        Effect.provide(SqliteDatabase.layer({ filename }))
      )
      expect(after).toEqual([])
    }), 60_000)
})
