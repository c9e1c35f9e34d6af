/**
 * A worker of the main job (node.md 7.4): a host-mode NodeRuntime serving `index-dir` on the shared
 * SQLite file. Prints `ready <json>` after its first sweep and `event <json>` per host event, one line
 * each, for the coordinator. Usage: `worker.ts <database file> <label>`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as NodeRuntime from "../NodeRuntime.js"
import * as IndexDir from "./IndexDir.js"

const [filename, label = "w?"] = process.argv.slice(2)
if (filename === undefined) {
  process.stderr.write("usage: worker.ts <database file> <label>\n")
  process.exit(2)
}

const line = (kind: string, value: unknown) => Effect.sync(() => process.stdout.write(`${kind} ${JSON.stringify(value)}\n`))

const program = Effect.gen(function*() {
  const host = yield* NodeRuntime.NodeHost
  yield* host.events.pipe(
    Stream.runForEach((event) => line("event", { label, pid: process.pid, ...event })),
    Effect.forkScoped
  )
  yield* host.sweepNow
  yield* line("ready", { pid: process.pid, hostId: host.identity.hostId, label })
  return yield* NodeRuntime.serve
}).pipe(
  Effect.scoped,
  Effect.provide(NodeRuntime.layer({ filename, flows: [IndexDir.flow], migrations: [IndexDir.migrations] }))
)

// Spawned by the coordinator: if it dies, our stdin closes and we shut down gracefully (releasing the run).
if (process.env["BATON_WORKER_WATCH_STDIN"] === "1") {
  process.stdin.on("close", () => process.kill(process.pid, "SIGTERM"))
  process.stdin.resume()
}

NodeRuntime.runMain(program)
