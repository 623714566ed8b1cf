// The processes signal enforcement stops: those of the shared process namespace that run the signal
// target (docs/helper.md §3.3). Like the Go helper, never PID 1 (the pause process), this process, its
// parent, or another helper; where Go excludes copies of its own static binary, this helper excludes
// processes running `berth-operator helper` (every Node program shares the node executable).
import { readdir, readFile, readlink } from 'node:fs/promises';
import { basename } from 'node:path';

export interface ProcTable {
  self: number;
  parent: number;
  list(): Promise<number[]>;
  /** /proc/<pid>/comm, "" when unreadable (the process may be gone). */
  comm(pid: number): Promise<string>;
  /** The target of /proc/<pid>/exe, "" when unreadable. */
  exe(pid: number): Promise<string>;
  /** /proc/<pid>/cmdline split at NULs, [] when unreadable. */
  cmdline(pid: number): Promise<string[]>;
}

// The kernel keeps 15 bytes of a command name (TASK_COMM_LEN - 1).
const COMM_MAX = 15;

/** Go's matchesTarget: the command name, the executable's base name, or a long target's 15-byte prefix. */
export function matchesTarget(target: string, comm: string, exe: string): boolean {
  if (comm !== '' && comm === target) return true;
  if (exe !== '' && basename(exe) === target) return true;
  return comm !== '' && target.length > COMM_MAX && comm === target.slice(0, COMM_MAX);
}

/** True for `node …/main.js helper …` (or main.ts, or the bin script): a helper container's process. */
export function isHelperProcess(argv: readonly string[]): boolean {
  const at = argv.indexOf('helper');
  return at > 0 && /(^|\/)(main\.[jt]s|berth-operator(\.js)?)$/.test(argv[at - 1] ?? '');
}

/** The PIDs to signal, lowest first. */
export async function workloadPids(table: ProcTable, target: string): Promise<number[]> {
  const out: number[] = [];
  for (const pid of (await table.list()).sort((a, b) => a - b)) {
    if (pid <= 1 || pid === table.self || pid === table.parent) continue;
    if (!matchesTarget(target, await table.comm(pid), await table.exe(pid))) continue;
    if (isHelperProcess(await table.cmdline(pid))) continue;
    out.push(pid);
  }
  return out;
}

const readOr = async <T>(read: () => Promise<T>, fallback: T): Promise<T> => {
  try {
    return await read();
  } catch {
    return fallback;
  }
};

/** The live /proc. */
export function osProcTable(): ProcTable {
  return {
    self: process.pid,
    parent: process.ppid,
    list: async () => (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number),
    comm: (pid) => readOr(async () => (await readFile(`/proc/${pid}/comm`, 'utf8')).trim(), ''),
    exe: (pid) => readOr(() => readlink(`/proc/${pid}/exe`), ''),
    cmdline: (pid) =>
      readOr(
        async () => (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter((a) => a !== ''),
        [],
      ),
  };
}
