/**
 * glibc's malloc raises its mmap and trim thresholds (up to 32 MiB) each time a large block it mapped
 * is freed, and from then on keeps what is freed in the process. Compiling the embedded database's
 * WebAssembly module at start frees a few hundred MiB of compiler memory on V8's threads: with the
 * thresholds grown, some 60–70 MiB of it stayed resident in an idle server for good. Fixed at glibc's
 * defaults (128 KiB) they no longer grow, and that memory goes back to the system. Other systems'
 * allocators ignore these variables.
 */
export const MALLOC_THRESHOLDS = {
  MALLOC_TRIM_THRESHOLD_: String(128 * 1024),
  MALLOC_MMAP_THRESHOLD_: String(128 * 1024),
};

/**
 * glibc reads the thresholds from the environment once, as the process starts: a long-running
 * process starts itself again once (the same process and pid: execve) with them set, unless the
 * operator set either. Returns when nothing is to be done; never otherwise.
 */
export function restartWithMallocThresholds(): void {
  if (
    process.platform !== 'linux' ||
    !process.execve ||
    Object.keys(MALLOC_THRESHOLDS).some((name) => process.env[name] !== undefined)
  ) {
    return;
  }
  process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    ...process.env,
    ...MALLOC_THRESHOLDS,
  });
}
