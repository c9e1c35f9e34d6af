import { Layer } from "effect"
import { freshLayer, runtimeContract } from "./fixtures/runtimeContract.js"
import { runtimeSignals } from "./fixtures/runtimeSignals.js"
import { memoryRuntime, sqlJournal, sqliteRuntime } from "./fixtures/runtimeSupport.js"

// Each runtime reads cancel evidence from the journal's table in its own database: the memory runtime
// provides that database's journal itself; the SQLite runtime gets one beside it.
const memory = freshLayer(() => memoryRuntime({ principal: { id: "local", kind: "operator" } }))
const sqlite = freshLayer(() => Layer.provideMerge(sqlJournal(), sqliteRuntime()))
runtimeContract("memory", memory)
runtimeContract("sqlite", sqlite)
runtimeSignals("memory", memory)
runtimeSignals("sqlite", sqlite)
