import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { Effect, Option } from "effect"
import * as HostIdentity from "../src/HostIdentity.js"
import * as HostProc from "../src/internal/hostProc.js"
import * as LiveIncarnations from "../src/internal/liveIncarnations.js"
import * as ProcessLiveness from "../src/ProcessLiveness.js"
import { type FakeProc, makeFakeProc, statLine } from "./fixtures/runtimeProcRoot.js"

const S = 30_000
const nowMs = 1_700_000_000_000
const self: HostIdentity.HostIdentity = {
  hostId: "host-a/boot-1/4026531836",
  pid: process.pid,
  incarnation: "n1-777-abcdefabcdef",
  startTicks: Option.some(777)
}
const claimant = HostIdentity.ownerOf(self)
const context = (heartbeatAtMs: number | null) => ({ claimant, heartbeatAtMs, nowMs })

let proc: FakeProc
let sleeper: ChildProcess
let gonePid: number

beforeAll(async () => {
  proc = makeFakeProc()
  proc.setBootTime(1_699_990_000) // boot 10 000 s before nowMs
  sleeper = spawn("sleep", ["120"], { stdio: "ignore" })
  const gone = spawn("true", [], { stdio: "ignore" })
  gonePid = gone.pid!
  await new Promise((resolve) => gone.once("exit", resolve))
})

afterAll(() => {
  sleeper.kill("SIGKILL")
  proc.remove()
})

const probeWith = (options: Partial<ProcessLiveness.Options> = {}) =>
  ProcessLiveness.makeWith({ procRoot: proc.root, identity: self, ...options })

describe("ProcessLiveness.probe (node.md 3.2)", () => {
  it.effect("rule 1: an owner on another host is judged by its lease alone", () =>
    Effect.gen(function*() {
      const { probe } = probeWith()
      const other = { hostId: "host-b/boot-9", pid: process.pid, nonce: `${self.incarnation}.x` }
      expect(yield* probe(other, context(nowMs - S))).toMatchObject({ alive: true, reason: "other-host-lease-fresh" })
      expect(yield* probe(other, context(nowMs - S - 1))).toMatchObject({ alive: false, reason: "other-host-lease-expired" })
      expect(yield* probe(other, context(null))).toMatchObject({ alive: false, reason: "other-host-lease-expired" })
    }))

  it.effect("rule 2: this pid is alive only with this incarnation's nonce", () =>
    Effect.gen(function*() {
      const { probe } = probeWith()
      const own = { hostId: self.hostId, pid: self.pid, nonce: HostIdentity.mintNonce(self)() }
      expect(yield* probe(own, context(nowMs - 10 * S))).toMatchObject({ alive: true, reason: "this-process" })
      const predecessor = { ...own, nonce: "n1-555-000000000000.1234" }
      expect(yield* probe(predecessor, context(nowMs))).toMatchObject({ alive: false, reason: "previous-incarnation" })
    }))

  it.effect("rule 2: a same-pid owner of another runtime running in this process is alive until that runtime stops", () =>
    Effect.gen(function*() {
      const { probe } = probeWith()
      const peer = yield* HostIdentity.detectWith({ env: {}, freshIncarnation: true })
      const owner = { hostId: self.hostId, pid: self.pid, nonce: HostIdentity.mintNonce(peer)() }
      yield* Effect.scoped(Effect.gen(function*() {
        yield* LiveIncarnations.hold(peer.incarnation)
        expect(yield* probe(owner, context(nowMs))).toMatchObject({ alive: true, reason: "this-process" })
      }))
      expect(yield* probe(owner, context(nowMs))).toMatchObject({ alive: false, reason: "previous-incarnation" })
    }))

  it.effect("rule 3: a pid that is not a safe integer >= 1 counts as alive", () =>
    Effect.gen(function*() {
      const { probe } = probeWith()
      for (const pid of [0, -4, 1.5, Number.NaN]) {
        const verdict = yield* probe({ hostId: self.hostId, pid, nonce: "n" }, context(null))
        expect(verdict).toMatchObject({ alive: true, reason: "pid-invalid" })
      }
    }))

  it.effect("rule 4: a pid that no longer exists (ESRCH) is dead", () =>
    Effect.gen(function*() {
      const { probe } = probeWith()
      const verdict = yield* probe({ hostId: self.hostId, pid: gonePid, nonce: "n1-5-abcdefabcdef.1" }, context(nowMs))
      expect(verdict).toMatchObject({ alive: false, reason: "pid-gone" })
    }))

  it.effect("rule 5: a live pid whose stat is unreadable, or a kill failing otherwise, counts as alive", () =>
    Effect.gen(function*() {
      const { probe } = probeWith()
      const verdict = yield* probe({ hostId: self.hostId, pid: sleeper.pid!, nonce: "x" }, context(nowMs))
      expect(verdict).toMatchObject({ alive: true, reason: "pid-unknown" })
      const eperm = probeWith({
        kill: () => {
          throw Object.assign(new Error("operation not permitted"), { code: "EPERM" })
        }
      })
      proc.setStat(424242, "S", 10)
      expect(yield* eperm.probe({ hostId: self.hostId, pid: 424242, nonce: "n1-10-abcdefabcdef.z" }, context(nowMs)))
        .toMatchObject({ alive: true, reason: "pid-matches" })
      const weird = probeWith({
        kill: () => {
          throw Object.assign(new Error("boom"), { code: "EINVAL" })
        }
      })
      expect(yield* weird.probe({ hostId: self.hostId, pid: 424242, nonce: "x" }, context(nowMs)))
        .toMatchObject({ alive: true, reason: "pid-unknown" })
    }))

  it.effect("rule 6: a zombie is dead", () =>
    Effect.gen(function*() {
      const { probe } = probeWith()
      proc.setStat(sleeper.pid!, "Z", 100, "sleep")
      const verdict = yield* probe({ hostId: self.hostId, pid: sleeper.pid!, nonce: "n1-100-abcdefabcdef.q" }, context(nowMs))
      expect(verdict).toMatchObject({ alive: false, reason: "pid-zombie" })
    }))

  it.effect("rule 7: a node nonce's start ticks decide between the same process and a reused pid", () =>
    Effect.gen(function*() {
      const { probe } = probeWith()
      proc.setStat(sleeper.pid!, "S", 5000, "we (ird) name")
      const same = yield* probe({ hostId: self.hostId, pid: sleeper.pid!, nonce: "n1-5000-abcdefabcdef.q" }, context(nowMs))
      expect(same).toMatchObject({ alive: true, reason: "pid-matches" })
      const reused = yield* probe({ hostId: self.hostId, pid: sleeper.pid!, nonce: "n1-4999-abcdefabcdef.q" }, context(nowMs))
      expect(reused).toMatchObject({ alive: false, reason: "pid-reused" })
    }))

  it.effect("rule 8: without start ticks in the nonce, the start time is compared with the heartbeat", () =>
    Effect.gen(function*() {
      const { probe } = probeWith()
      const startTicks = 500_000 // 5 000 s after boot
      proc.setStat(sleeper.pid!, "S", startTicks)
      const startedAtMs = 1_699_990_000 * 1000 + startTicks * 10
      const owner = { hostId: self.hostId, pid: sleeper.pid!, nonce: "3f2a-plain-uuid" }
      expect(yield* probe(owner, context(startedAtMs + 60_000)))
        .toMatchObject({ alive: true, reason: "pid-started-before-heartbeat" })
      expect(yield* probe(owner, context(startedAtMs - 2_000))).toMatchObject({ alive: false, reason: "pid-reused" })
      expect(yield* probe(owner, context(startedAtMs - 1_000)))
        .toMatchObject({ alive: true, reason: "pid-started-before-heartbeat" })
      expect(yield* probe(owner, context(null))).toMatchObject({ alive: true, reason: "pid-started-before-heartbeat" })
    }))

  it.effect("takeOverHungOwnersAfter turns a live same-host owner dead once its lease is that old", () =>
    Effect.gen(function*() {
      const { probe } = probeWith({ takeOverHungOwnersAfter: "60 seconds" })
      proc.setStat(sleeper.pid!, "T", 5000)
      const owner = { hostId: self.hostId, pid: sleeper.pid!, nonce: "n1-5000-abcdefabcdef.q" }
      expect(yield* probe(owner, context(nowMs - 59_999))).toMatchObject({ alive: true, reason: "pid-matches" })
      expect(yield* probe(owner, context(nowMs - 60_000))).toMatchObject({ alive: false, reason: "pid-matches" })
    }))

  it.effect("over the real /proc, a live child with its real start ticks matches; check answers booleans", () =>
    Effect.gen(function*() {
      if (!fs.existsSync("/proc/self/stat")) return
      const identity = yield* HostIdentity.detectWith({ env: {} })
      const liveness = ProcessLiveness.makeWith({ identity })
      const ticks = HostProc.stat("/proc", sleeper.pid!)!.startTicks
      const owner = { hostId: identity.hostId, pid: sleeper.pid!, nonce: `n1-${ticks}-abcdefabcdef.u` }
      const ctx = { claimant: HostIdentity.ownerOf(identity), heartbeatAtMs: null, nowMs }
      expect(yield* liveness.probe(owner, ctx)).toMatchObject({ alive: true, reason: "pid-matches" })
      expect(yield* liveness.check(owner, ctx)).toBe(true)
      expect(yield* liveness.check({ ...owner, pid: gonePid }, ctx)).toBe(false)
    }))

  it("stat lines are parsed after the last parenthesis", () => {
    expect(HostProc.parseStat(statLine(7, "S", 99, "a) (b c)"))).toEqual({ state: "S", startTicks: 99 })
    expect(HostProc.parseStat("garbage")).toBeUndefined()
  })
})
