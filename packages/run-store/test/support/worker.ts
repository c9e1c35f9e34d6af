/**
 * Parent side of `fixtures/worker.ts`: spawn, request/response over JSON lines.
 */
import type { ChildProcess } from "node:child_process"
import * as readline from "node:readline"
import { spawnFixture } from "../../../database/test/support/processes.js"

const fixture = new URL("../fixtures/worker.ts", import.meta.url)

export interface Worker {
  readonly pid: number
  readonly child: ChildProcess
  readonly call: <A = any>(op: string, args?: unknown) => Promise<A>
  readonly stop: () => Promise<void>
}

export class WorkerError extends Error {
  constructor(readonly detail: any) {
    super(`worker error: ${JSON.stringify(detail)}`)
  }
}

export const spawnWorker = (args: ReadonlyArray<string>): Promise<Worker> =>
  new Promise((resolve, reject) => {
    const child = spawnFixture(fixture, args, { stdio: ["pipe", "pipe", "pipe"] })
    const pending = new Map<number, { resolve: (v: any) => void; reject: (e: unknown) => void }>()
    let next = 0
    let stderr = ""
    child.stderr?.on("data", (chunk) => (stderr += String(chunk)))
    child.once("exit", (code, signal) => {
      for (const p of pending.values()) p.reject(new Error(`worker exited ${code ?? signal}: ${stderr}`))
      pending.clear()
      reject(new Error(`worker exited ${code ?? signal} before ready: ${stderr}`))
    })
    readline.createInterface({ input: child.stdout! }).on("line", (line) => {
      // Effect's default logger also writes to stdout: only protocol lines are JSON objects.
      if (!line.startsWith("{")) return
      const message = JSON.parse(line)
      if (message.ready) {
        resolve({
          pid: message.pid,
          child,
          call: (op, args) =>
            new Promise((res, rej) => {
              const id = next++
              pending.set(id, { resolve: res, reject: rej })
              child.stdin!.write(JSON.stringify({ id, op, args }) + "\n")
            }),
          stop: () =>
            new Promise((res) => {
              if (child.exitCode !== null || child.signalCode !== null) return res()
              child.once("exit", () => res())
              child.stdin!.end()
            })
        })
        return
      }
      if (message.fatal) return reject(new Error(message.fatal))
      const waiter = pending.get(message.id)
      if (waiter === undefined) return
      pending.delete(message.id)
      if ("ok" in message) waiter.resolve(message.ok)
      else waiter.reject(new WorkerError(message.err))
    })
  })
