/** The host's code-drift check before it claims a run (sweep discovery and delegation take-up). */
import { Effect } from "effect"
import type { HostCore } from "./hostCore.js"

/**
 * Whether the run's recorded code differs from this host's, in which case the host skips it. The
 * first skip of a run is logged at WARN with the run, its flow, the run's version and this host's
 * (event `skipped-drift`); later sweeps skip it quietly, so a parked run is not left waiting silently
 * nor logged every tick.
 */
export const skipsForDrift = (core: HostCore, runId: string) =>
  Effect.gen(function*() {
    const drift = yield* core.runtime.codeDrift(runId)
    if (drift === undefined) return false
    if (!core.driftLogged.has(runId)) {
      core.driftLogged.add(runId)
      const recorded = drift.recorded ?? drift.recordedEngine ?? "?"
      const current = drift.current ?? drift.currentEngine ?? "nothing"
      const message = `run ${runId} of flow ${drift.flowId} recorded ${recorded}; this host runs ${current}; resume it with --allow-code-drift from this host's catalog (the resume adopts the caller's code): baton resume ${runId} --allow-code-drift --config <this host's catalog>`
      yield* Effect.logWarning(message).pipe(
        Effect.annotateLogs({ runId, flowId: drift.flowId, recordedVersion: recorded, hostVersion: current })
      )
      yield* core.publish({ _tag: "skipped-drift", runId, message })
    }
    return true
  })
