import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { preparedAppendSuite } from "./support/preparedAppend.js"

const url = TestDatabase.postgresTestUrl("journal prepared append")

describe.skipIf(url === undefined)("prepared append (PostgreSQL)", () =>
  preparedAppendSuite(() => TestDatabase.layerPostgres(url!)))
