/** Raw disk baselines: what `dd` takes to write and read the bytes Coffer stores. */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { onCleanup } from './lib.ts';

/** Commands running now (dd), killed at exit so that none outlives an interrupted run. */
const commands = new Set<ChildProcess>();
onCleanup(() => {
  for (const child of commands) child.kill('SIGKILL');
});

function runCommand(command: string, args: string[]): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    commands.add(child);
    child.once('exit', () => commands.delete(child));
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr += text;
    });
    child.once('error', fail);
    child.once('exit', (code) =>
      code === 0 ? done() : fail(new Error(`${command} ${args.join(' ')}: exit ${code}\n${stderr}`)),
    );
  });
}

/** Flushes dirty pages, then drops the page cache; false when the kernel refuses (not root). */
export function dropCaches(): boolean {
  spawnSync('sync');
  try {
    writeFileSync('/proc/sys/vm/drop_caches', '3');
    return true;
  } catch {
    return false;
  }
}

/** Seconds `dd` takes to write `mib` MiB of zeros to `path` and fdatasync it. */
export async function rawWrite(path: string, mib: number): Promise<number> {
  const start = performance.now();
  await runCommand('dd', ['if=/dev/zero', `of=${path}`, 'bs=1M', `count=${mib}`, 'conv=fdatasync']);
  return (performance.now() - start) / 1000;
}

/** Seconds `dd` takes to read `path` to /dev/null. */
export async function rawRead(path: string): Promise<number> {
  const start = performance.now();
  await runCommand('dd', [`if=${path}`, 'of=/dev/null', 'bs=1M']);
  return (performance.now() - start) / 1000;
}
