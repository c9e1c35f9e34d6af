/**
 * The differential run of `Consensus.layerLocal` against this package's row
 * strategy: a seeded random walk over every operation, and extreme owners and
 * times, must give the same outcomes and guards on both.
 */
import * as Consensus from "@baton/journal/Consensus"
import type { OwnerId } from "@baton/journal/OwnerId"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { A, B, C, S } from "../../../journal/test/support/owners.js"
import { contractRuns } from "../support/contractRuns.js"
import { type Database, migrated } from "../support/stack.js"

/** The row strategy over a migrated `db`, after `prepare` created the runs it may grant. */
const rowStrategy = (db: Database, prepare: Effect.Effect<unknown, unknown, SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(Layer.provideMerge(SqlConsensus.layer, migrated(db)))
    yield* Effect.provide(prepare, context)
    return Context.get(context, Consensus.Consensus)
  })

// A small deterministic PRNG so a failure replays.
const prng = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x7fffffff
}

/**
 * `layerLocal` and this package's `SqlConsensus` answer every operation alike: the walk and the
 * extreme values run on both, the row strategy over pending run rows created first.
 */
export const consensusAgreement = (
  name: string,
  database: () => Database,
  steps: number,
  timeouts: { readonly probe: number; readonly walk: number }
) =>
describe(`layerLocal and the run store's SqlConsensus on ${name} agree`, () => {
  it.effect("a random operation sequence yields the same outcomes and guards on both strategies", () =>
    Effect.gen(function*() {
      const local = yield* Consensus.makeLocal
      const remote = yield* rowStrategy(database(), contractRuns)
      const owners: ReadonlyArray<OwnerId> = [A, B, C]
      const kinds = ["same-host-pid-dead", "cross-host-unreachable-stale", "lease-expired"] as const
      const runs = ["r1", "r2"]
      const random = prng(7)
      const pick = <T>(list: ReadonlyArray<T>): T => list[Math.floor(random() * list.length)]!
      let now = 0
      const seen = new Set<string>()
      let lastGrantee: OwnerId = A
      let lastOwner: OwnerId = A
      const grants: Array<number> = [0]
      for (let step = 0; step < steps; step++) {
        // Time moves by small steps and by jumps landing exactly on and just past the cutoff.
        now += pick([0, 0, 1, 500, S - 1, S, S + 1])
        const run = pick(runs)
        const who = pick(owners)
        const evidence: Consensus.LivenessEvidence = {
          expectedOwner: pick([lastGrantee, lastOwner, pick(owners)]),
          checkedAtMs: random() < 0.85 ? now : now - 1,
          kind: pick(kinds)
        }
        const generation = random() < 0.7 ? grants[grants.length - 1]! : pick(grants)
        const lagging = Math.max(0, now - pick([0, 0, 2000]))
        const op = pick(["claim", "activate", "heartbeat", "reconfirm", "release", "steal", "recover", "guard"] as const)
        const apply = (c: Consensus.Service): Effect.Effect<unknown, Consensus.ConsensusError> => {
          switch (op) {
            case "claim":
              return c.claim(run, who, now)
            case "activate":
              return c.activate(run, who, generation, now)
            case "heartbeat":
              return c.heartbeat(run, who, lagging)
            case "reconfirm":
              return c.reconfirm(run, who, now)
            case "release":
              return c.release(run, who)
            case "steal":
              return c.steal(run, who, now, evidence)
            case "recover":
              return c.recover(run, evidence.expectedOwner, generation, who, now, evidence)
            case "guard":
              return Effect.as(c.guard(run, who), "held")
          }
        }
        const left = yield* Effect.either(apply(local))
        const right = yield* Effect.either(apply(remote))
        const show = (result: typeof left) => result._tag === "Right" ? result.right : result.left.code
        expect(show(right), `step ${step}: ${op} ${run} ${who.nonce} at ${now}`).toEqual(show(left))
        const outcome = left._tag === "Right" ? left.right as { _tag?: string; reason?: string } | undefined : undefined
        if (outcome?._tag === "Granted") {
          grants.push(now)
          lastGrantee = who
        }
        if (outcome?._tag === "Activated") lastOwner = who
        seen.add(`${op}:${outcome?.reason ?? outcome?._tag ?? show(left)}`)
        for (const r of runs) {
          for (const o of owners) {
            const l = yield* Effect.either(local.guard(r, o))
            const g = yield* Effect.either(remote.guard(r, o))
            expect(g._tag, `step ${step}: guard ${r} ${o.nonce}`).toBe(l._tag)
          }
        }
      }
      // The walk reached every interesting branch, including both sides of the staleness cutoff.
      for (
        const branch of [
          "claim:Granted", "claim:already_claimed", "claim:owner_held", "activate:Activated", "activate:Lost",
          "heartbeat:Renewed", "reconfirm:Lost", "steal:Granted", "steal:owner_live", "steal:evidence_invalid",
          "steal:already_claimed", "recover:Recovered", "recover:claim_fresh", "recover:claim_changed", "guard:held",
          "guard:fence_lost"
        ]
      ) expect(seen.has(branch), `${branch} in ${[...seen].join(" ")}`).toBe(true)
    }).pipe(Effect.scoped), timeouts.walk)

  it.effect("extreme owners and times round-trip: safe-integer pids and clocks, 1024-unit non-ASCII ids", () =>
    Effect.gen(function*() {
      const local = yield* Consensus.makeLocal
      const run = "r\u{1F600}".padEnd(1024, "z")
      const remote = yield* rowStrategy(
        database(),
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, state_json)
            VALUES (1, ${run}, 'pending', 0, '{}')`)
      )
      const big: OwnerId = { hostId: "h\u00e9\u{1F600}".padEnd(1024, "x"), pid: Number.MAX_SAFE_INTEGER, nonce: "n".repeat(1024) }
      const near: OwnerId = { ...big, pid: Number.MAX_SAFE_INTEGER - 1 }
      const thief: OwnerId = { hostId: "other", pid: 0, nonce: "t" }
      const t0 = Number.MAX_SAFE_INTEGER - 2 * S - 10
      const script = (c: Consensus.Service) =>
        Effect.gen(function*() {
          const out: Array<unknown> = []
          out.push(yield* c.claim(run, big, t0))
          out.push(yield* c.activate(run, big, t0, t0))
          out.push(yield* Effect.either(c.guard(run, near)))
          out.push(yield* Effect.either(c.guard(run, big)))
          out.push(yield* c.heartbeat(run, big, t0 + 5))
          out.push(yield* c.heartbeat(run, near, t0 + 6))
          const at = t0 + 5 + S
          out.push(yield* c.steal(run, thief, at, { expectedOwner: big, checkedAtMs: at, kind: "lease-expired" }))
          out.push(yield* c.steal(run, thief, at + 1, { expectedOwner: big, checkedAtMs: at + 1, kind: "lease-expired" }))
          out.push(yield* c.activate(run, thief, at + 1, Number.MAX_SAFE_INTEGER))
          out.push(yield* c.heartbeat(run, thief, Number.MAX_SAFE_INTEGER))
          out.push(yield* Effect.either(c.guard(run, big)))
          return out.map((item) => JSON.parse(JSON.stringify(item, (_, v) => v?._tag === "Left" ? v.left.code : v)))
        })
      const expected = yield* script(local)
      expect(yield* script(remote)).toEqual(expected)
      expect(expected[6]).toEqual({ _tag: "Rejected", reason: "owner_live" })
      expect(expected[7]).toEqual({ _tag: "Granted", grantedAtMs: t0 + 6 + S })
      expect(expected[9]).toEqual({ _tag: "Renewed", heartbeatAtMs: Number.MAX_SAFE_INTEGER })
    }).pipe(Effect.scoped), timeouts.probe)
})
