import { type ChildProcess, fork } from 'node:child_process';
import { availableParallelism } from 'node:os';

/**
 * AVIF encoding in child processes: libheif encodes the whole image in one call, deaf to sharp's
 * timeout, so an encode past its deadline is stopped by killing its process, which frees the CPU and
 * the render slot at once. A child serves one encode at a time and is kept for the next; one killed
 * is replaced by a fresh one, started ahead.
 */

/** Idle children kept ready; more are started when more encodes run at once, and let go after. */
const IDLE_KEPT = availableParallelism();

interface Child {
  process: ChildProcess;
  /** Resolves once the child loaded sharp; rejects if it died first. */
  ready: Promise<void>;
}

const idle: Child[] = [];

function start(): Child {
  const child = fork(new URL('./render-child.ts', import.meta.url), [], {
    serialization: 'advanced',
    // Only the child's own module: a test runner's or profiler's flags are not its business.
    execArgv: [],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', () => reject(new Error('the render process stopped before it was ready')));
  });
  ready.catch(() => undefined);
  return { process: child, ready };
}

/** A busy child keeps this process running until it answers; an idle one never does. */
function hold(child: Child, busy: boolean): void {
  if (busy) {
    child.process.ref();
    child.process.channel?.ref();
  } else {
    child.process.unref();
    child.process.channel?.unref();
  }
}

function release(child: Child): void {
  hold(child, false);
  if (idle.length < IDLE_KEPT && child.process.connected) idle.push(child);
  else child.process.kill();
}

/** An idle child still alive, or a new one. */
function take(): Child {
  for (let child = idle.pop(); child; child = idle.pop()) if (child.process.connected) return child;
  return start();
}

/** A fresh child kept idle, ready for the next encode. */
function spare(): void {
  const child = start();
  hold(child, false);
  idle.push(child);
}

/** What an encode answers, as the child sent it. */
type Reply = { data: Uint8Array; error?: undefined } | { error: string };

/**
 * Encodes `request` (raw pixels and a quality) in a child process within `deadlineMs`, counted from
 * when the child starts on it; answers `undefined` when the deadline passed (and the child was killed).
 */
export async function encodeInChild(request: object, deadlineMs: number): Promise<Buffer | undefined> {
  const child = take();
  hold(child, true);
  await child.ready.catch((error: unknown) => {
    hold(child, false);
    throw error;
  });
  const reply = await new Promise<Reply | undefined>((resolve, reject) => {
    const proc = child.process;
    const done = () => {
      clearTimeout(timer);
      proc.off('message', onMessage);
      proc.off('exit', onExit);
    };
    const onMessage = (message: Reply) => {
      done();
      resolve(message);
    };
    const onExit = () => {
      done();
      hold(child, false);
      reject(new Error('the render process stopped'));
    };
    const timer = setTimeout(() => {
      done();
      hold(child, false);
      proc.kill('SIGKILL');
      if (idle.length === 0) spare();
      resolve(undefined);
    }, deadlineMs);
    proc.on('message', onMessage);
    proc.once('exit', onExit);
    proc.send(request);
  });
  if (!reply) return undefined;
  release(child);
  if (reply.error !== undefined) throw new Error(`AVIF encoding failed: ${reply.error}`);
  return Buffer.from(reply.data.buffer, reply.data.byteOffset, reply.data.byteLength);
}
