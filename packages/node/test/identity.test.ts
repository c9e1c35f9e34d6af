import { describe, expect, it } from "@effect/vitest"
import { runFixture } from "../../database/test/support/processes.js"
import { Effect, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as HostIdentity from "../src/HostIdentity.js"
import { makeFakeProc } from "./fixtures/runtimeProcRoot.js"

const fixture = new URL("./fixtures/runtime-identity.ts", import.meta.url)
const linux = fs.existsSync("/proc/sys/kernel/random/boot_id")

describe("HostIdentity", () => {
  it.effect("detect reads hostname, boot id and pid namespace; the pid is this process's", () =>
    Effect.gen(function*() {
      const identity = yield* HostIdentity.detectWith({ env: {} })
      expect(identity.pid).toBe(process.pid)
      const hostname = os.hostname().toLowerCase().replace(/[^a-z0-9.-]/g, "-") || "localhost"
      expect(identity.hostId.startsWith(`${hostname}/`)).toBe(true)
      if (linux) {
        const boot = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
        expect(identity.hostId.split("/")[1]).toBe(boot)
        expect(Option.isSome(identity.startTicks)).toBe(true)
      }
      expect(identity.incarnation).toMatch(/^n1-(\d+|x)-[0-9a-f]{12}$/)
    }))

  it("two processes on one host share the hostId, differ in pid, incarnation and nonces", async () => {
    const env = { ...process.env, BATON_HOST_ID: "" }
    delete (env as Record<string, string | undefined>)["BATON_HOST_ID"]
    const [a, b] = await Promise.all([runFixture(fixture, [], { env }), runFixture(fixture, [], { env })])
    const left = JSON.parse(a.stdout)
    const right = JSON.parse(b.stdout)
    expect(left.hostId).toBe(right.hostId)
    expect(left.pid).not.toBe(right.pid)
    expect(left.incarnation).not.toBe(right.incarnation)
    for (const side of [left, right]) {
      expect(side.nonces[0]).not.toBe(side.nonces[1])
      for (const nonce of side.nonces) expect(nonce.startsWith(`${side.incarnation}.`)).toBe(true)
      expect(side.incarnation).toContain(`n1-${side.startTicks ?? "x"}-`)
    }
  })

  it.effect("a procRoot with another boot id or pid namespace gives another hostId", () =>
    Effect.gen(function*() {
      const proc = makeFakeProc()
      try {
        proc.setBootId("11111111-2222-3333-4444-555555555555")
        proc.setPidNamespace("4026531836")
        proc.setSelfStat(4242)
        const base = yield* HostIdentity.detectWith({ procRoot: proc.root, hostname: "Build_Box", env: {} })
        expect(base.hostId).toBe("build-box/11111111-2222-3333-4444-555555555555/4026531836")
        expect(base.startTicks).toEqual(Option.some(4242))
        proc.setBootId("99999999-2222-3333-4444-555555555555")
        const rebooted = yield* HostIdentity.detectWith({ procRoot: proc.root, hostname: "Build_Box", env: {} })
        expect(rebooted.hostId).not.toBe(base.hostId)
        proc.setBootId("11111111-2222-3333-4444-555555555555")
        proc.setPidNamespace("4026532999")
        const container = yield* HostIdentity.detectWith({ procRoot: proc.root, hostname: "Build_Box", env: {} })
        expect(container.hostId).toBe("build-box/11111111-2222-3333-4444-555555555555/4026532999")
        proc.setPidNamespace(undefined)
        const noNamespace = yield* HostIdentity.detectWith({ procRoot: proc.root, hostname: "", env: {} })
        expect(noNamespace.hostId).toBe("localhost/11111111-2222-3333-4444-555555555555")
      } finally {
        proc.remove()
      }
    }))

  it.effect("BATON_HOST_ID and the hostId option replace the host id whole", () =>
    Effect.gen(function*() {
      const fromEnv = yield* HostIdentity.detectWith({ env: { BATON_HOST_ID: "rack-7" } })
      expect(fromEnv.hostId).toBe("rack-7")
      const fromOption = yield* HostIdentity.detect({ hostId: "h-opt", pid: 4321 })
      expect(fromOption).toMatchObject({ hostId: "h-opt", pid: 4321 })
      expect(HostIdentity.ownerOf(fromOption)).toEqual({ hostId: "h-opt", pid: 4321, nonce: fromOption.incarnation })
    }))

  it.effect("an override that breaks the identifier rules fails naming the field", () =>
    Effect.gen(function*() {
      const nul = yield* Effect.flip(HostIdentity.detectWith({ env: { BATON_HOST_ID: "a\u0000b" } }))
      expect(nul).toMatchObject({ _tag: "@baton/node/NodeRuntimeError", reason: "invalid_options", field: "hostId" })
      const empty = yield* Effect.flip(HostIdentity.detect({ hostId: "" }))
      expect(empty.field).toBe("hostId")
      const pid = yield* Effect.flip(HostIdentity.detect({ pid: 0 }))
      expect(pid).toMatchObject({ reason: "invalid_options", field: "pid" })
    }))

  it.effect("nonces are recognised by their incarnation prefix and carry start ticks", () =>
    Effect.gen(function*() {
      const self = yield* HostIdentity.detectWith({ env: {} })
      const other = yield* HostIdentity.detectWith({ env: {}, freshIncarnation: true })
      expect(self.incarnation).not.toBe(other.incarnation)
      const nonce = HostIdentity.mintNonce(self)()
      expect(HostIdentity.isOwnNonce(self, nonce)).toBe(true)
      expect(HostIdentity.isOwnNonce(other, nonce)).toBe(false)
      expect(HostIdentity.isOwnNonce(self, self.incarnation)).toBe(false)
      expect(HostIdentity.startTicksOfNonce("n1-123-abcdefabcdef.0000")).toEqual(Option.some(123))
      expect(HostIdentity.startTicksOfNonce("n1-x-abcdefabcdef.0000")).toEqual(Option.none())
      expect(HostIdentity.startTicksOfNonce("3f2c9b1e-uuid")).toEqual(Option.none())
    }))
})
