/** A temporary directory shaped like /proc, for identity and liveness tests. */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export interface FakeProc {
  readonly root: string
  readonly setBootId: (id: string) => void
  readonly setPidNamespace: (inode: string | undefined) => void
  readonly setSelfStat: (startTicks: number) => void
  readonly setStat: (pid: number, state: string, startTicks: number, comm?: string) => void
  readonly setBootTime: (seconds: number) => void
  readonly remove: () => void
}

/** A stat line with the given state and start ticks (field 22). */
export const statLine = (pid: number, state: string, startTicks: number, comm = "node") => {
  // fields 4..21 are placeholders; field 22 is starttime.
  const middle = Array.from({ length: 18 }, (_, i) => String(i + 1)).join(" ")
  return `${pid} (${comm}) ${state} ${middle} ${startTicks} 0 0 0\n`
}

export const makeFakeProc = (): FakeProc => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "baton-proc-"))
  const write = (rel: string, text: string) => {
    const file = path.join(root, rel)
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, text)
  }
  const fake: FakeProc = {
    root,
    setBootId: (id) => write("sys/kernel/random/boot_id", `${id}\n`),
    setPidNamespace: (inode) => {
      const file = path.join(root, "self", "ns", "pid")
      fs.rmSync(file, { force: true })
      if (inode !== undefined) {
        fs.mkdirSync(path.dirname(file), { recursive: true })
        fs.symlinkSync(`pid:[${inode}]`, file)
      }
    },
    setSelfStat: (startTicks) => write("self/stat", statLine(1, "R", startTicks)),
    setStat: (pid, state, startTicks, comm) => write(`${pid}/stat`, statLine(pid, state, startTicks, comm)),
    setBootTime: (seconds) => write("stat", `cpu  1 2 3 4\nbtime ${seconds}\nprocesses 10\n`),
    remove: () => fs.rmSync(root, { recursive: true, force: true })
  }
  return fake
}
