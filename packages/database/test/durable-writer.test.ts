import { describe } from "@effect/vitest"
import * as TestDatabase from "@baton/database/TestDatabase"
import { writerSuite } from "./suites/writerSuite.js"

describe("DurableWriter on SQLite (TestDatabase)", () => {
  writerSuite(() => TestDatabase.layer, { keysAreIgnored: true })
})
