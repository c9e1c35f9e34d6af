/**
 * A worker process of the queue bench (spawned by `scripts/bench/queue.ts` with an IPC channel):
 *
 *   worker.ts <system> work <target json>
 *     opens the system's worker, says `ready`, serves no-op jobs from `go` until `stop`, then
 *     reports its handler starts, CPU from `go` to `stop` and peak RSS;
 *   worker.ts <system> workflows <target json> <count> <concurrency>
 *     W2: starts and awaits `count` three-step workflows, `concurrency` at once, and reports.
 *   worker.ts baton-pg|baton-sqlite wake-host <target json>
 *     an idle Baton host with the defaults: says `ready` past a sweep tick, serves no-op jobs started
 *     by another process until `stop`, then reports its handler starts and when it sent each statement (`wake`);
 *   worker.ts baton-pg|baton-sqlite wake-self <target json> <count> <gap ms>
 *     the same host starts `count` no-op jobs itself, one at a time after an idle `gap ms`, and
 *     reports its handler starts, its statement times and each start's run and commit time (`wake`).
 */
import type { WakeStart } from "./baton.js"
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
  if (mode === "wake-host" || mode === "wake-self") {
    const Baton = await import("./baton.js")
    const host = Baton.wakeHost(target, recorder)
    await host.ready()
    let starts: ReadonlyArray<WakeStart> | undefined
    if (mode === "wake-self") {
      starts = await Baton.startWhileIdle(Number(count), Number(concurrency), host.start)
    } else {
      const stop = receive("stop")
      await send({ type: "ready" })
      await stop
    }
    const wake = { sentAt: host.sentAt(), ...(starts === undefined ? {} : { starts }) }
    await send({ type: "report", report: { starts: recorder.starts, cpuMs: 0, rssMb: peakRssMb(), wake } })
    await host.close()
    return
  }
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
