import * as TestJournal from "@baton/journal/TestJournal"
import { journalContract } from "./support/journalContract.js"

journalContract("SQLite (in-memory)", (options) => TestJournal.layer(options))
