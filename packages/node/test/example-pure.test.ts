import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Batches from "../src/example/batches.js"
import * as Glob from "../src/example/glob.js"
import * as Hashing from "../src/example/hashing.js"
import * as PlainLoop from "../src/example/plainLoop.js"
import * as Walk from "../src/example/walk.js"

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "baton-example-"))

const write = (root: string, relative: string, content: string | Buffer) => {
  fs.mkdirSync(path.dirname(path.join(root, relative)), { recursive: true })
  fs.writeFileSync(path.join(root, relative), content)
}

describe("glob", () => {
  it("matches *, ? and ** by segment", () => {
    const js = Glob.compile("**/*.js")
    expect(js.matches("a.js")).toBe(true)
    expect(js.matches("x/y/a.js")).toBe(true)
    expect(js.matches("x/y/a.jsx")).toBe(false)
    const one = Glob.compile("src/?.ts")
    expect(one.matches("src/a.ts")).toBe(true)
    expect(one.matches("src/ab.ts")).toBe(false)
    expect(one.matches("src/x/a.ts")).toBe(false)
    const star = Glob.compile("esm/*")
    expect(star.matches("esm/Effect.js")).toBe(true)
    expect(star.matches("esm/internal/x.js")).toBe(false)
    const tail = Glob.compile("esm/**")
    expect(tail.matches("esm/internal/x.js")).toBe(true)
    expect(tail.matches("cjs/x.js")).toBe(false)
    expect(Glob.compile("a+b(1).js").matches("a+b(1).js")).toBe(true)
  })

  it("refuses bad patterns naming the rule", () => {
    expect(() => Glob.compile("")).toThrow(/pattern: must not be empty/)
    expect(() => Glob.compile("/abs/*")).toThrow(/relative/)
    expect(() => Glob.compile("a**b")).toThrow(/whole path segment/)
    expect(() => Glob.compile("a//b")).toThrow(/empty path segment/)
  })
})

describe("batches", () => {
  const files = (sizes: ReadonlyArray<number>) => sizes.map((size, i) => ({ path: `f${i}`, size, mtimeMs: 0 }))

  it("cuts greedily by files and bytes; a large file is a batch alone", () => {
    const cut = Batches.cut(files([1, 1, 1, 1, 1]), 2, 100)
    expect(cut.map((b) => b.length)).toEqual([2, 2, 1])
    const bySize = Batches.cut(files([40, 40, 40, 500, 10]), 10, 100)
    expect(bySize.map((b) => b.map((f) => f.size))).toEqual([[40, 40], [40], [500], [10]])
    expect(Batches.cut([], 5, 5)).toEqual([])
    // Deterministic: the same list gives the same batches.
    expect(Batches.cut(files([3, 9, 4, 4, 1]), 2, 10)).toEqual(Batches.cut(files([3, 9, 4, 4, 1]), 2, 10))
  })

  it("names steps zero-padded", () => {
    expect(Batches.stepName(5, 11)).toBe("hash-0005")
    expect(Batches.stepName(12, 12_000)).toBe("hash-00012")
  })
})

describe("walk", () => {
  it.effect("lists regular files depth-first in code-unit order, skipping symlinks and filtering", () =>
    Effect.gen(function*() {
      const root = tempDir()
      write(root, "b.txt", "bb")
      write(root, "a/z.js", "z")
      write(root, "a/B.js", "BBB")
      write(root, "C.js", "c")
      fs.symlinkSync(path.join(root, "b.txt"), path.join(root, "link.txt"))
      const listing = yield* Walk.walk(root)
      expect(listing.files.map((f) => f.path)).toEqual(["C.js", "a/B.js", "a/z.js", "b.txt"])
      expect(listing.skipped).toBe(1)
      expect(listing.totalBytes).toBe(1 + 3 + 1 + 2)
      const js = yield* Walk.walk(root, { pattern: Glob.compile("**/*.js") })
      expect(js.files.map((f) => f.path)).toEqual(["C.js", "a/B.js", "a/z.js"])
      const limited = yield* Effect.flip(Walk.walk(root, { limit: 2 }))
      expect(limited).toBeInstanceOf(Walk.TooManyFiles)
    }))
})

describe("hashing", () => {
  it.effect("hashes in chunks and reports ok, changed and missing", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const big = Buffer.alloc(Hashing.chunkBytes * 3 + 17, 7)
      write(root, "big.bin", big)
      write(root, "small.txt", "hello")
      const listing = yield* Walk.walk(root)
      const [bigFile, smallFile] = listing.files
      const ok = yield* Hashing.hashFile(root, bigFile!)
      expect(ok.status).toBe("ok")
      expect(ok.sha256).toBe(createHash("sha256").update(big).digest("hex"))
      fs.writeFileSync(path.join(root, "small.txt"), "hello, changed")
      const changed = yield* Hashing.hashFile(root, smallFile!)
      expect(changed.status).toBe("changed")
      expect(changed.size).toBe(14)
      expect(changed.sha256).toBe(createHash("sha256").update("hello, changed").digest("hex"))
      fs.rmSync(path.join(root, "small.txt"))
      const missing = yield* Hashing.hashFile(root, smallFile!)
      expect(missing).toMatchObject({ status: "missing", sha256: null })
    }))

  it.effect("the plain loop hashes every file once", () =>
    Effect.gen(function*() {
      const root = tempDir()
      for (let i = 0; i < 30; i++) write(root, `d${i % 3}/f${i}.txt`, `file ${i}`)
      const result = yield* PlainLoop.run(root)
      expect(result.files).toBe(30)
      expect(result.bytes).toBe(Array.from({ length: 30 }, (_, i) => `file ${i}`.length).reduce((a, b) => a + b))
    }))
})
