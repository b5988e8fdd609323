/**
 * How a server or worker process runs lean: glibc's malloc thresholds and a smaller V8 young
 * generation, which neither Node.js nor glibc let a process change once it runs.
 *
 * glibc's malloc raises its mmap and trim thresholds (up to 32 MiB) each time a large block it mapped
 * is freed, and from then on keeps what is freed in the process. Compiling the embedded database's
 * WebAssembly module at start frees a few hundred MiB of compiler memory on V8's threads: with the
 * thresholds grown, some 60–70 MiB of it stayed resident in an idle server for good. Fixed, they no
 * longer grow, and that memory goes back to the system. At 1 MiB rather than glibc's starting 128 KiB:
 * a render's buffers of a few hundred KiB (libwebp's, libvips') are then reused from the heap instead of
 * being mapped, faulted in and unmapped anew each time, which cost a 12 MP JPEG to 400 px WebP render
 * some 2 ms (7%); the idle server holds 2–4 MiB more. Other systems' allocators ignore these variables.
 */
export const MALLOC_THRESHOLDS = {
  MALLOC_TRIM_THRESHOLD_: String(1024 * 1024),
  MALLOC_MMAP_THRESHOLD_: String(1024 * 1024),
};

/**
 * V8 grows each half of its young generation up to 32 MiB on a machine with memory to spare, and
 * keeps it: a server's requests allocate little that lives, so 8 MiB costs a few more, cheap,
 * collections and leaves some 40–60 MiB less resident.
 */
export const V8_OPTIONS = ['--max-semi-space-size=8'];

/**
 * The thresholds are read from the environment, and V8's heap is sized, once, as the process
 * starts: a long-running process without them starts itself again once (the same process and pid:
 * execve) with them. What the operator set of either (a variable, an option on the command line)
 * is kept. Returns when nothing is to be done; never otherwise.
 */
export function restartLean(): void {
  const env = { ...MALLOC_THRESHOLDS, ...process.env };
  const given = (option: string) => process.execArgv.some((arg) => arg.startsWith(option.split('=')[0]!));
  const options = V8_OPTIONS.filter((option) => !given(option));
  const lean =
    options.length === 0 && Object.keys(MALLOC_THRESHOLDS).every((name) => process.env[name] !== undefined);
  if (lean || !process.execve) return;
  process.execve(
    process.execPath,
    [process.execPath, ...options, ...process.execArgv, ...process.argv.slice(1)],
    env,
  );
}
