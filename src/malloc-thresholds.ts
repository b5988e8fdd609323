/**
 * Imported first by main.ts, before anything else is loaded. glibc's malloc raises its mmap and trim
 * thresholds (up to 32 MiB) each time a large block it mapped is freed, and from then on keeps what
 * is freed in the process. Compiling the embedded database's WebAssembly module at start frees a few
 * hundred MiB of compiler memory on V8's threads: with the thresholds grown, some 60–70 MiB of it
 * stayed resident in an idle server for good. Fixed at glibc's defaults (128 KiB) they no longer grow,
 * and that memory goes back to the system.
 *
 * glibc reads them from the environment once, as the process starts: a server or worker process
 * therefore starts itself again once (the same process, same pid: execve) with them set, unless
 * the operator set either. Other systems' allocators ignore these variables.
 */
const THRESHOLD = String(128 * 1024);
const LONG_RUNNING = new Set(['serve', 'worker', undefined]);

if (
  process.platform === 'linux' &&
  process.execve &&
  LONG_RUNNING.has(process.argv[2]) &&
  process.env.MALLOC_TRIM_THRESHOLD_ === undefined &&
  process.env.MALLOC_MMAP_THRESHOLD_ === undefined
) {
  process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    ...process.env,
    MALLOC_TRIM_THRESHOLD_: THRESHOLD,
    MALLOC_MMAP_THRESHOLD_: THRESHOLD,
  });
}
