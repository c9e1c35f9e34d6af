import * as TestJournal from "@baton/journal/TestJournal"
import { admissionContract } from "./support/admissionContract.js"

admissionContract("SQLite (in-memory)", (options) => TestJournal.layer(options))
