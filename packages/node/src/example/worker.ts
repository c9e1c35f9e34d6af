/**
 * A worker of the main job: a host-mode NodeRuntime serving `index-dir` on the shared
 * SQLite file. Prints `ready <json>` after its first sweep and `event <json>` per host event, one line
 * each, for the coordinator. Usage: `worker.ts <database file> <label>`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import * as NodeRuntime from "../NodeRuntime.js"
import * as IndexDir from "./IndexDir.js"

// Once the coordinator is gone its pipe is closed: the worker keeps serving (and releases the run on
// SIGTERM) but stops writing lines nobody reads.
const line = (kind: string, value: unknown) =>
  Effect.sync(() => {
    if (process.stdout.writable) process.stdout.write(`${kind} ${JSON.stringify(value)}\n`)
  })

/**
 * The worker's program on a host-mode runtime serving `index-dir`: `ready <json>` after the first sweep,
 * `event <json>` per host event, then serve until interrupted.
 *
 * @since 0.1.0
 */
export const work = (label: string, runtime: Layer.Layer<NodeRuntime.Provided, NodeRuntime.BuildError>) =>
  Effect.gen(function*() {
    const host = yield* NodeRuntime.NodeHost
    yield* host.events.pipe(
      Stream.runForEach((event) => line("event", { label, pid: process.pid, ...event })),
      Effect.forkScoped
    )
    yield* host.sweepNow
    yield* line("ready", { pid: process.pid, hostId: host.identity.hostId, label })
    return yield* NodeRuntime.serve
  }).pipe(Effect.scoped, Effect.provide(runtime))

// Run as a script, not when imported (the PostgreSQL test worker reuses `work`).
const script = process.argv[1]
if (script !== undefined && fs.realpathSync(script) === fileURLToPath(import.meta.url)) {
  const [filename, label = "w?"] = process.argv.slice(2)
  if (filename === undefined) {
    process.stderr.write("usage: worker.ts <database file> <label>\n")
    process.exit(2)
  }

  // A closed pipe (the coordinator exited) must not crash the worker with an EPIPE trace.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "EPIPE") throw error
    })
  }

  // Spawned by the coordinator: if it dies, our stdin closes and we shut down gracefully (releasing the run).
  if (process.env["BATON_WORKER_WATCH_STDIN"] === "1") {
    process.stdin.on("close", () => process.kill(process.pid, "SIGTERM"))
    process.stdin.resume()
  }

  NodeRuntime.runMain(work(label, NodeRuntime.layer({ filename, flows: [IndexDir.flow], migrations: [IndexDir.migrations] })))
}
