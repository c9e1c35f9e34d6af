import * as TestDatabase from "@baton/database/TestDatabase"
import { integrityContract } from "./support/integrityContract.js"

integrityContract("SQLite (in-memory)", () => TestDatabase.layer)
