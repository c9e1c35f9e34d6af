import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as RunStore from "@baton/run-store/RunStore"
import * as TestRunStore from "@baton/run-store/TestRunStore"

const A = { hostId: "host-a", pid: 101, nonce: "a" }

describe("smoke", () => {
  it.effect("lifecycle", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r1", '{"b":1, "a":[2]}')
      const row = yield* store.get("r1")
      expect(row.status).toBe("pending")
      const c = yield* store.claimAndOwn("r1", row, A, 0)
      expect(c._tag).toBe("Activated")
      const hb = yield* store.heartbeat("r1", A, 5)
      expect(hb).toEqual({ _tag: "Updated", heartbeatAtMs: 5 })
      const t = yield* store.transitionOwned("r1", A, "completed", "{}")
      expect(t._tag).toBe("Transitioned")
      const after = yield* store.get("r1")
      expect(after.status).toBe("completed")
    }).pipe(Effect.provide(TestRunStore.layerWithDatabase)))
})
