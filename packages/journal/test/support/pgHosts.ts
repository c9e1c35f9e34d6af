/**
 * Several "hosts" on one PostgreSQL schema: each host is its own pool
 * (`PgDatabase.layer`), journal and in-memory `Consensus` (so hosts share no
 * leases: for unfenced traffic). The first host creates the schema
 * (`TestDatabase.layerPostgres`, dropped when the scope closes).
 */
import type { DurableWriter } from "@baton/database/DurableWriter"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import type { Consensus } from "@baton/journal/Consensus"
import type { Journal } from "@baton/journal/Journal"
import type { SqlJournalOptions } from "@baton/journal/SqlJournal"
import * as TestJournal from "@baton/journal/TestJournal"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"

export type Host = Context.Context<Journal | Consensus | DurableWriter | SqlClient.SqlClient>

export const pgHosts = (url: string, count: number, options: SqlJournalOptions = {}) =>
  Effect.gen(function*() {
    const first = yield* Layer.build(TestJournal.layerOn(TestDatabase.layerPostgres(url), options))
    const sql = Context.get(first, SqlClient.SqlClient)
    const [row] = yield* sql<{ schema: string }>`SELECT current_schema() AS schema`
    const hosts: Array<Host> = [first]
    for (let i = 1; i < count; i++) {
      hosts.push(yield* Layer.build(TestJournal.layerOn(PgDatabase.layer({ url, schema: row!.schema }), options)))
    }
    return hosts
  })
