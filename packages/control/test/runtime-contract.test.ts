import * as TestJournal from "@baton/journal/TestJournal"
import { Layer } from "effect"
import { freshLayer, runtimeContract } from "./fixtures/runtimeContract.js"
import { runtimeSignals } from "./fixtures/runtimeSignals.js"
import { memoryRuntime, sqlJournal, sqliteRuntime } from "./fixtures/runtimeSupport.js"

// Each runtime reads cancel evidence from a journal beside it: the memory runtime from the journal in
// its layer's context, the SQL runtime from the journal's table in its own database.
const memory = freshLayer(() =>
  Layer.provideMerge(memoryRuntime({ principal: { id: "local", kind: "operator" } }), TestJournal.layer())
)
const sqlite = freshLayer(() => Layer.provideMerge(sqlJournal(), sqliteRuntime()))
runtimeContract("memory", memory)
runtimeContract("sqlite", sqlite)
runtimeSignals("memory", memory)
runtimeSignals("sqlite", sqlite)
