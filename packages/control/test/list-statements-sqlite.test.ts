import * as TestDatabase from "@baton/database/TestDatabase"
import { listStatementsSuite } from "./fixtures/listStatements.js"

listStatementsSuite("SQLite", () => TestDatabase.layer)
