/** Measurements of a task's time, memory and CPU, and the statistics of their samples. */
import { setTimeout as sleep } from 'node:timers/promises';
import type { CofferServer } from './coffer-server.ts';
import { MiB } from './lib.ts';
import { machineBusySeconds } from './proc.ts';
export interface Measurement<T> {
  result: T;
  seconds: number;
  /** CPU seconds of the server's process and of this (client) process during the run. */
  serverCpu: number;
  clientCpu: number;
  /** CPU seconds of the whole machine during the run: server, client, database and anything else. */
  machineCpu: number;
  memory: { before: number; peak: number; after: number };
}

/**
 * Runs `work`, timing it and sampling the server's RSS every few ms (plus the kernel's peak counter,
 * reset at the start, when available). `after` is read `settleMs` after the end.
 */
export async function measure<T>(
  server: CofferServer,
  work: () => Promise<T>,
  settleMs = 500,
): Promise<Measurement<T>> {
  const peakReset = server.resetPeak();
  const before = server.rss();
  let sampled = before;
  const sampler = setInterval(() => {
    sampled = Math.max(sampled, server.rss());
  }, 10);
  const serverCpu = server.cpuSeconds();
  const clientCpu = process.cpuUsage();
  const machineCpu = machineBusySeconds();
  const start = performance.now();
  let result: T;
  try {
    result = await work();
  } finally {
    clearInterval(sampler);
  }
  const seconds = (performance.now() - start) / 1000;
  const machineCpuUsed = machineBusySeconds() - machineCpu;
  const serverCpuUsed = server.cpuSeconds() - serverCpu;
  const clientUsage = process.cpuUsage(clientCpu);
  const kernelPeak = peakReset ? (server.peak() ?? 0) : 0;
  const peak = Math.max(sampled, kernelPeak, server.rss());
  await sleep(settleMs);
  return {
    result,
    seconds,
    serverCpu: serverCpuUsed,
    clientCpu: (clientUsage.user + clientUsage.system) / 1e6,
    machineCpu: machineCpuUsed,
    memory: { before, peak, after: server.rss() },
  };
}

export function median(values: number[]): number {
  return percentile(values, 50);
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (rank - low);
}

export function mean(values: number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}

/** Runs `task(i)` for i in [0, count) with at most `concurrency` in flight. */
export async function pool(
  count: number,
  concurrency: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < count; i = next++) await task(i);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
}

export const fmt = {
  mib: (bytes: number) => `${(bytes / MiB).toFixed(bytes < 10 * MiB ? 1 : 0)} MiB`,
  rate: (mibPerSecond: number) => `${mibPerSecond.toFixed(0)} MiB/s`,
  perSecond: (value: number, unit: string) => `${value.toFixed(0)} ${unit}/s`,
  ratio: (value: number) => `${(value * 100).toFixed(0)}%`,
  ms: (value: number) => `${value.toFixed(value < 10 ? 2 : 1)} ms`,
  size: (mib: number) => (mib >= 1024 && mib % 1024 === 0 ? `${mib / 1024} GiB` : `${mib} MiB`),
};
