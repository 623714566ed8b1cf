// What a benchmark reads of another process (the operator, a component of the control plane) from /proc:
// its CPU seconds (utime + stime), its resident memory now and at its peak.
import { readFile } from 'node:fs/promises';

export interface ProcessUsage {
  cpuSeconds: number;
  rssMib: number;
  /** VmHWM: the highest RSS the process has had. */
  peakRssMib: number;
}

const kib = (status: string, field: string): number =>
  Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? Number.NaN);

/** CPU seconds and RSS of process `pid`. */
export async function usage(pid: number): Promise<ProcessUsage> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return {
    cpuSeconds: (Number(fields[11]) + Number(fields[12])) / 100,
    rssMib: kib(status, 'VmRSS') / 1024,
    peakRssMib: kib(status, 'VmHWM') / 1024,
  };
}

/** The sum of the samples of `name` in a Prometheus text exposition whose labels contain every `match`. */
export function metricSum(text: string, name: string, ...match: string[]): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!(line.startsWith(`${name} `) || line.startsWith(`${name}{`))) continue;
    if (match.every((m) => line.includes(m))) sum += Number(line.split(' ').at(-1));
  }
  return sum;
}

/** The operator's /metrics text (plain HTTP on loopback, as the process helper starts it). */
export async function scrapeMetrics(hostPort: string): Promise<string> {
  return (await fetch(`http://${hostPort}/metrics`)).text();
}
