import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { startBatchSuite } from "./fixtures/startBatch.js"

describe("startMany batches on SQLite", () => startBatchSuite("SQLite", () => TestDatabase.layer))
