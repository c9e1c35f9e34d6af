import * as TestDatabase from "@baton/database/TestDatabase"
import * as Companion from "@baton/journal/Companion"
import { Journal } from "@baton/journal/Journal"
import * as JournalEvent from "@baton/journal/JournalEvent"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { type Host, pgHosts } from "./support/pgHosts.js"

const url = TestDatabase.postgresTestUrl("journal concurrency")
const timeout = 120_000

const on = <A, E>(host: Host, effect: Effect.Effect<A, E, any>) => Effect.provide(effect, host) as Effect.Effect<A, E>

const append = (runId: string, sourceId: string) =>
  Effect.flatMap(Journal, (journal) => journal.emitDurableUnfenced({ runId, sourceId, eventType: "n", payload: {} }))

describe.skipIf(url === undefined)("PostgreSQL, several connections", () => {
  it.live("check 16 [PG]: three connections appending to one run get exactly seqs 0..149", () =>
    Effect.gen(function*() {
      const hosts = yield* pgHosts(url!, 3)
      const seqs = yield* Effect.all(
        hosts.map((host, n) =>
          on(host, Effect.forEach(Array.from({ length: 50 }), () => Effect.map(append("r", `s${n}`), (r) => r.seq)))
        ),
        { concurrency: "unbounded" }
      )
      expect(seqs.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 150 }, (_, i) => i))
    }).pipe(Effect.scoped), timeout)

  it.live("check 35: different runs append concurrently; one run serializes in commit order", () =>
    Effect.gen(function*() {
      const [h1, h2] = yield* pgHosts(url!, 2)
      const log: Array<string> = []
      const hold = (runId: string) =>
        on(
          h1!,
          Effect.flatMap(Journal, (journal) =>
            journal.transact(
              Effect.gen(function*() {
                const receipt = yield* journal.emitDurableUnfenced({ runId, sourceId: "h1", eventType: "n", payload: {} })
                yield* Effect.sleep("300 millis")
                log.push("h1-body-end")
                return receipt.seq
              }),
              { key: runId }
            ))
        )
      const later = (runId: string) =>
        Effect.sleep("50 millis").pipe(
          Effect.zipRight(on(h2!, append(runId, "h2"))),
          Effect.tap(() => Effect.sync(() => log.push("h2-receipt"))),
          Effect.map((receipt) => receipt.seq)
        )
      yield* Effect.all([hold("r1"), later("r2")], { concurrency: "unbounded" })
      expect(log).toEqual(["h2-receipt", "h1-body-end"])
      log.length = 0
      const [first, second] = yield* Effect.all([hold("r"), later("r")], { concurrency: "unbounded" })
      expect(log).toEqual(["h1-body-end", "h2-receipt"])
      expect([first, second]).toEqual([0, 1])
    }).pipe(Effect.scoped), timeout)

  it.live("check 36: a companion append takes the key of the run it is about", () =>
    Effect.gen(function*() {
      const [h1, h2] = yield* pgHosts(url!, 2)
      const log: Array<string> = []
      const hold = on(
        h1!,
        Effect.flatMap(Journal, (journal) =>
          journal.transact(
            Effect.sleep("300 millis").pipe(Effect.zipRight(Effect.sync(() => log.push("h1-body-end")))),
            { key: "r" }
          ))
      )
      const fact = (runId: string) =>
        Effect.sleep("50 millis").pipe(
          Effect.zipRight(on(
            h2!,
            Companion.append({ ...Companion.runStore, runId, eventType: "flows.consensus.claimed", payload: {} })
          )),
          Effect.tap(() => Effect.sync(() => log.push(`h2-${runId}`)))
        )
      yield* Effect.all([hold, fact("r")], { concurrency: "unbounded" })
      expect(log).toEqual(["h1-body-end", "h2-r"])
      log.length = 0
      yield* Effect.all([hold, fact("r2")], { concurrency: "unbounded" })
      expect(log).toEqual(["h2-r2", "h1-body-end"])
      const page = yield* on(h1!, Companion.entries("run-store", "r"))
      expect(page.entries.map((e) => [e.runId, (e.payload as { runId: string }).runId])).toEqual([
        [JournalEvent.companionRunId("run-store", "r"), "r"]
      ])
    }).pipe(Effect.scoped), timeout)

  it.live("a follower never skips an entry that commits later with a lower seq", () =>
    Effect.gen(function*() {
      const [h1, h2, h3] = yield* pgHosts(url!, 3, { pollInterval: "20 millis" })
      const writer = (host: Host, sourceId: string) =>
        on(
          host,
          Effect.flatMap(Journal, (journal) =>
            Effect.forEach(Array.from({ length: 40 }, (_, i) => i), (i) =>
              journal.transact(
                journal.emitDurableUnfenced({ runId: "r", sourceId, eventType: "n", payload: { i } }).pipe(
                  Effect.zipLeft(Effect.sleep(`${(i * 7) % 13} millis`))
                ),
                { key: "r" }
              )))
        )
      const follower = on(
        h3!,
        Effect.flatMap(Journal, (journal) =>
          journal.stream({ runId: "r" }).pipe(Stream.take(80), Stream.map((e) => e.seq), Stream.runCollect))
      )
      const [seen] = yield* Effect.all([follower, writer(h1!, "h1"), writer(h2!, "h2")], { concurrency: "unbounded" })
      expect([...seen]).toEqual(Array.from({ length: 80 }, (_, i) => i))
    }).pipe(Effect.scoped), timeout)
})
