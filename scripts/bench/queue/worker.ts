/**
 * A worker process of the queue bench (spawned by `scripts/bench/queue.ts` with an IPC channel):
 *
 *   worker.ts <system> work <target json>
 *     opens the system's worker, says `ready`, serves no-op jobs from `go` until `stop`, then
 *     reports its handler starts, CPU from `go` to `stop` and peak RSS;
 *   worker.ts <system> workflows <target json> <count> <concurrency>
 *     W2: starts and awaits `count` three-step workflows, `concurrency` at once, and reports.
 */
import { makeRecorder, type SystemName, type WorkerSide, cpuMsSince, peakRssMb, receive, send, type Target } from "./common.js"

const [name, mode, targetJson, count, concurrency] = process.argv.slice(2) as [SystemName, string, string, string?, string?]

const load = async (system: SystemName): Promise<WorkerSide> => {
  switch (system) {
    case "baton-pg":
    case "baton-sqlite":
      return (await import("./baton.js")).worker
    case "pgboss":
      return (await import("./pgboss.js")).worker
    case "graphile":
      return (await import("./graphile.js")).worker
    case "dbos":
      return (await import("./dbos.js")).worker
  }
}

const main = async () => {
  const target = JSON.parse(targetJson) as Target
  const side = await load(name)
  const recorder = makeRecorder()
  if (mode === "workflows") {
    if (side.workflows === undefined) throw new Error(`${name} runs no workflows`)
    const report = await side.workflows(target, recorder, { count: Number(count), concurrency: Number(concurrency) })
    await send({ type: "report", report })
    return
  }
  const handle = await side.open(target, recorder)
  const go = receive("go")
  const stop = receive("stop")
  await send({ type: "ready" })
  await go
  const cpu = process.cpuUsage()
  await handle.begin()
  await stop
  const cpuMs = cpuMsSince(cpu)
  await send({ type: "report", report: { starts: recorder.starts, cpuMs, rssMb: peakRssMb() } })
  await handle.end()
}

main().then(
  // The report is sent: leave whatever a library left open (pools, timers).
  () => process.exit(0),
  (error: unknown) =>
    send({ type: "error", message: error instanceof Error ? error.stack ?? error.message : String(error) }).then(
      () => process.exit(1)
    )
)
