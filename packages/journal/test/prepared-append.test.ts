import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { preparedAppendSuite } from "./support/preparedAppend.js"

describe("prepared append (SQLite)", () => preparedAppendSuite(() => TestDatabase.layer))
