import { readFileSync } from 'node:fs';

/**
 * What /proc says about a process on Linux: its state letter and its start time (clock ticks
 * since boot, field 22 of /proc/<pid>/stat). `'gone'` when there is no such process, `undefined`
 * when /proc cannot tell (another system, or /proc hidden).
 */
function procStat(pid: number): { state: string; startTime: string } | 'gone' | undefined {
  if (process.platform !== 'linux') return undefined;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'gone' : undefined;
  }
  // The command name (field 2) is in parentheses and may itself hold spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const [state, startTime] = [fields[0], fields[19]];
  return state && startTime ? { state, startTime } : undefined;
}

/** The start time of `pid` that `isAlive` compares against, where the system can tell it. */
export function processStartTime(pid: number): string | undefined {
  const stat = procStat(pid);
  return typeof stat === 'object' ? stat.startTime : undefined;
}

/**
 * Whether the process `pid` still runs. A zombie (killed, not yet reaped) is dead, and so is a
 * process whose start time differs from `startTime`: its pid was reused after the one recorded
 * exited. Where /proc cannot tell, any process with that pid counts as alive.
 */
export function isAlive(pid: number, startTime?: string): boolean {
  const stat = procStat(pid);
  if (stat === 'gone') return false;
  if (stat) return stat.state !== 'Z' && (startTime === undefined || stat.startTime === startTime);
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
