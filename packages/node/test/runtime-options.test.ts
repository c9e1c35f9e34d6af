/**
 * node.md 4.1: options are validated before anything opens, failing `invalid_options` naming the field
 * and the rule: PostgreSQL's `clockSync` and `maxConnections`, and every rule of an application
 * migration set (no database file is created for a set the ledger would refuse).
 */
import { describe, expect, it } from "@effect/vitest"
import type * as Migrations from "@baton/database/Migrations"
import * as TestDatabase from "@baton/database/TestDatabase"
import { type Duration, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as PgSchema from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("node runtime options (layerPg)")

// Nothing listens on port 1: a build that got as far as connecting would fail `connect_failed`.
const unreachable = "postgres://nobody@127.0.0.1:1/none"

const buildError = <A, E>(layer: Layer.Layer<A, E>) => Effect.flip(Effect.scoped(Layer.build(layer)))

describe("NodeRuntime options", () => {
  it.effect("layerPg: a clockSync that is not a duration of at least 1 second is invalid_options naming clockSync", () =>
    Effect.gen(function*() {
      for (const clockSync of ["whenever", 0, "500 millis", -5, Infinity, "0 seconds"] as ReadonlyArray<Duration.DurationInput>) {
        const error = yield* buildError(NodeRuntime.layerPg({ url: unreachable, mode: "client", clockSync }))
        expect(error, String(clockSync)).toMatchObject({
          _tag: "@baton/node/NodeRuntimeError",
          reason: "invalid_options",
          field: "clockSync"
        })
      }
      const words = yield* buildError(NodeRuntime.layerPg({ url: unreachable, clockSync: "whenever" as never }))
      expect(words).toMatchObject({ message: "clockSync: must be a duration such as \"5 seconds\"" })
      const zero = yield* buildError(NodeRuntime.layerPg({ url: unreachable, clockSync: 0 }))
      expect(zero).toMatchObject({ message: "clockSync: must be at least 1 second" })
    }))

  it.effect("layerPg: maxConnections that is not a positive safe integer is invalid_options naming maxConnections", () =>
    Effect.gen(function*() {
      for (const maxConnections of [0, -1, 1.5, NaN, "4" as never]) {
        const error = yield* buildError(NodeRuntime.layerPg({ url: unreachable, mode: "client", maxConnections }))
        expect(error, String(maxConnections)).toEqual(
          new NodeRuntime.NodeRuntimeError({
            reason: "invalid_options",
            field: "maxConnections",
            message: "maxConnections: must be a positive safe integer (the pool size)"
          })
        )
      }
    }))

  it.live.skipIf(url === undefined)("layerPg: valid clockSync and maxConnections build against a real server", () =>
    Effect.scoped(Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      yield* Effect.scoped(Layer.build(NodeRuntime.layerPg({ url: url!, schema, mode: "client", clockSync: "1 second", maxConnections: 2 })))
    })), 60_000)

  it.effect("layer: an application migration set the ledger would refuse fails naming the field; no file is created", () =>
    Effect.gen(function*() {
      const migration = Effect.void
      // The rules and messages are the database ledger's (`Migrations.validate`); node names the set.
      const cases: ReadonlyArray<readonly [ReadonlyArray<Migrations.MigrationSet>, string, string]> = [
        [[{ namespace: "", idOffset: 20000, migrations: {} }], "migrations[0]", "invalid migration namespace \"\""],
        [[{ namespace: "App", idOffset: 20000, migrations: {} }], "migrations[0]", "invalid migration namespace \"App\""],
        [[{ namespace: "control", idOffset: 20000, migrations: {} }], "migrations[0]", "duplicate migration namespace \"control\""],
        [[{ namespace: "a", idOffset: 20000, migrations: {} }, { namespace: "a", idOffset: 21000, migrations: {} }], "migrations[1]", "duplicate migration namespace \"a\""],
        [[{ namespace: "a", idOffset: 5, migrations: {} }], "migrations[0].idOffset", "10000 or more"],
        [[{ namespace: "a", idOffset: 10500, migrations: {} }], "migrations[0]", "must be a non-negative safe multiple of 1000"],
        [[{ namespace: "a", idOffset: 20000, migrations: {} }, { namespace: "b", idOffset: 20000, migrations: {} }], "migrations[1]", "migration offset 20000 is used by both a and b"],
        [[{ namespace: "a", idOffset: 20000, migrations: null as never }], "migrations[0]", "migrations of a must be a record"],
        [[{ namespace: "a", idOffset: 20000, migrations: { "first": migration } }], "migrations[0]", "migration key \"first\" of a is not \"<digits>_<name>\""],
        [[{ namespace: "a", idOffset: 20000, migrations: { "0_zero": migration } }], "migrations[0]", "local ids run from 1 to 999"],
        [[{ namespace: "a", idOffset: 20000, migrations: { "1000_big": migration } }], "migrations[0]", "local ids run from 1 to 999"],
        [[{ namespace: "a", idOffset: 20000, migrations: { "1_a": migration, "001_b": migration } }], "migrations[0]", "migration id 20001 is declared twice in a"],
        [[{ namespace: "a", idOffset: 20000, migrations: { "1_a": "CREATE TABLE t (x)" as never } }], "migrations[0]", "migration \"1_a\" of a is not an Effect"]
      ]
      for (const [migrations, field, rule] of cases) {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-options-"))
        const error = yield* buildError(NodeRuntime.layer({ filename: path.join(dir, "baton.db"), mode: "client", migrations }))
        expect(error, field).toMatchObject({ _tag: "@baton/node/NodeRuntimeError", reason: "invalid_options", field })
        expect((error as { message: string }).message, field).toContain(`${field}: `)
        expect((error as { message: string }).message, field).toContain(rule)
        expect(fs.readdirSync(dir), field).toEqual([])
      }
    }))
})
