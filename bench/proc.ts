/** Probes of a process's memory and CPU time (Linux /proc), and the stop of a child process. */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { KiB } from './lib.ts';
export function procStatus(pid: number | 'self', field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(
      readFileSync(`/proc/${pid}/status`, 'utf8'),
    );
    return match ? Number(match[1]) * KiB : undefined;
  } catch {
    return undefined;
  }
}

export function resetPeakOf(pid: number | 'self'): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

const CLOCK_TICKS = 100;

/**
 * CPU seconds the whole machine has spent busy since it booted (every process, user and kernel time;
 * not idle nor waiting for I/O): the first line of /proc/stat.
 */
export function machineBusySeconds(): number {
  const [line] = readFileSync('/proc/stat', 'utf8').split('\n', 1);
  const [user, nice, system, , , irq, softirq, steal] = line!.trim().split(/\s+/).slice(1).map(Number);
  return (user! + nice! + system! + irq! + softirq! + steal!) / CLOCK_TICKS;
}

export function procCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** SIGTERM, then `kill` (SIGKILL and clean-up) once the child has exited or `graceMs` passed. */
export async function stopChild(child: ChildProcess, graceMs: number, kill: () => void): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(graceMs)]);
  kill();
}
