import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { call, createProject, expectStatus, type Project } from './client.ts';
import type { CofferServer } from './coffer-server.ts';
import { startWebhookReceiver } from './helper-servers.ts';
import { ADMIN_KEY, type Bench, envInteger, progress } from './lib.ts';
import { fmt, percentile } from './measure.ts';
import { machineBusySeconds } from './proc.ts';
import type { Section } from './report.ts';
import { now, spanRate, steadyRate, waitForCount } from './webhook-arrivals.ts';
import { countDeliveries, deliveryTotal, type Hook, makeEvents, startServer } from './webhook-coffer.ts';
import { plainLoop } from './webhook-loop.ts';
import type { ReceiverStats } from './webhook-receiver.ts';

const RATE_TARGET = 1000;
const RATIO_TARGET = 0.5;
/** The dispatcher's requests in flight (createDispatcher's default concurrency). */
const DISPATCHER_CONCURRENCY = 64;

const HOLD_SECONDS = 86_400;

export const webhooks: Bench = {
  name: 'webhooks',
  description:
    'webhook deliveries/s to a local HTTPS receiver vs a plain undici POST loop; signatures checked',
  async run(context) {
    const wanted = envInteger('COFFER_BENCH_DELIVERIES', 5000);
    const hookCount = envInteger('COFFER_BENCH_WEBHOOKS', 10);
    const loopConcurrency = envInteger('COFFER_BENCH_WEBHOOK_CONCURRENCY', DISPATCHER_CONCURRENCY);
    const initiateConcurrency = envInteger('COFFER_BENCH_CONCURRENCY', 16);
    const events = Math.ceil(wanted / hookCount);
    const deliveries = events * hookCount;
    const stallMs = 30_000;
    const dir = join(context.scratch, 'webhooks');
    const dataDir = join(dir, 'data');

    const receiver = await startWebhookReceiver(join(dir, 'receiver'));
    let server: CofferServer | undefined;
    try {
      // ------------------------------------------------ 1. events, with every first attempt held back
      progress(`webhooks: Coffer with first attempts held back ${HOLD_SECONDS} s; ${hookCount} webhooks`);
      server = await startServer(context, dataDir, receiver, HOLD_SECONDS);
      const project = await createProject(server);
      const hooks: Hook[] = [];
      for (let i = 1; i <= hookCount; i++) {
        const path = `/hooks/${i}`;
        const created = await call('POST', `${server.url}/v1/projects/${project.id}/webhooks`, {
          token: ADMIN_KEY,
          body: { url: `${receiver.origin}${path}`, events: ['file.uploaded'] },
        });
        expectStatus(created, 201, 'create webhook');
        receiver.setSecret(path, created.body.signing_secret);
        hooks.push({ id: created.body.id, path });
      }
      const org = await call('GET', `${server.url}/v1/projects/${project.id}`, { token: ADMIN_KEY });
      const organizationId = (org.body?.organization_id as string | undefined) ?? 'org_bench';

      progress(`webhooks: ${events} initiates → ${deliveries} pending deliveries`);
      const backlogStart = performance.now();
      await makeEvents(project, 0, events, initiateConcurrency);
      const backlogSeconds = (performance.now() - backlogStart) / 1000;
      const pending = await countDeliveries(server, project.id, hooks, 'pending');
      if (pending !== deliveries) throw new Error(`${pending} deliveries pending, not ${deliveries}`);
      if ((await receiver.stats()).count !== 0) throw new Error('deliveries were sent while held back');
      await server.close();
      server = undefined;

      // ------------------------------------------------------------------------- 2. the plain loop
      progress(`webhooks: plain undici loop, ${deliveries} POSTs, ${loopConcurrency} in flight`);
      const plainSecret = 'whsec_plain_loop_secret';
      receiver.setSecret('/plain', plainSecret);
      const envelope = (i: number) => ({
        event: 'file.uploaded',
        timestamp: new Date().toISOString(),
        organization_id: organizationId,
        project_id: project.id,
        data: {
          file_id: `file_01PLAIN${String(i).padStart(19, '0')}`,
          filename: `webhook-bench-${String(i).padStart(6, '0')}.bin`,
          size: 1024,
          mime_type: 'application/octet-stream',
          status: 'uploading',
        },
      });
      const plainBefore = await plainLoop(
        receiver,
        '/plain',
        plainSecret,
        deliveries,
        loopConcurrency,
        envelope,
      );

      // ------------------------------------------------------------------ 3. the drain of the backlog
      progress(`webhooks: restart with first attempts due at once; draining ${deliveries} deliveries`);
      receiver.reset();
      const restartAt = now();
      server = await startServer(context, dataDir, receiver, 0);
      const liveServer = server;
      const readyAt = now();
      // CPU is counted from the first arrival, over the window the rate is: the start-up before it is not the drain's.
      const cpuNow = () => ({
        server: liveServer.cpuSeconds(),
        receiver: receiver.cpuSeconds(),
        machine: machineBusySeconds(),
      });
      let cpuFrom = cpuNow();
      const rssBefore = server.rss();
      let rssPeak = rssBefore;
      const sampler = setInterval(() => {
        rssPeak = Math.max(rssPeak, liveServer.rss());
      }, 10);
      const diagnose = async () => {
        const [first] = (await deliveryTotal(liveServer, project.id, hooks[0]!, 'pending')).items;
        return `a pending delivery's last error: ${first?.last_error ?? 'none'}`;
      };
      let drain: ReceiverStats;
      try {
        drain = await waitForCount(receiver, deliveries, stallMs, diagnose, () => {
          cpuFrom = cpuNow();
        });
      } finally {
        clearInterval(sampler);
      }
      const drainServerCpu = server.cpuSeconds() - cpuFrom.server;
      const drainReceiverCpu = receiver.cpuSeconds() - cpuFrom.receiver;
      const drainMachineCpu = machineBusySeconds() - cpuFrom.machine;
      // The outcomes of the last deliveries are recorded just after their answers.
      let stillPending = await countDeliveries(server, project.id, hooks, 'pending');
      for (let waited = 0; stillPending > 0 && waited < 10_000; waited += 100) {
        await sleep(100);
        stillPending = await countDeliveries(server, project.id, hooks, 'pending');
      }
      const delivered = await countDeliveries(server, project.id, hooks, 'delivered');

      // ------------------------------------------------------ 4. end to end: events while dispatching
      progress(`webhooks: ${events} initiates while dispatching → ${deliveries} deliveries`);
      receiver.reset();
      const liveStart = now();
      const liveCpu = server.cpuSeconds();
      // The project of the first start, through the restarted server (the same data, another port).
      const restarted: Project = {
        ...project,
        api: (method, path, body) =>
          call(method, `${liveServer.url}/v1/projects/${project.id}${path}`, { token: project.key, body }),
      };
      await makeEvents(restarted, events, events, initiateConcurrency);
      const liveCreated = now();
      const live = await waitForCount(receiver, deliveries, stallMs, diagnose);
      const liveServerCpu = server.cpuSeconds() - liveCpu;

      // ------------------------------------------------------------------- 5. the plain loop again
      progress('webhooks: plain undici loop again');
      const plainAfter = await plainLoop(
        receiver,
        '/plain',
        plainSecret,
        deliveries,
        loopConcurrency,
        envelope,
      );

      const drainRate = spanRate(drain);
      const liveRate = (deliveries * 1000) / (live.last - liveStart);
      const plainRates = [spanRate(plainBefore.stats), spanRate(plainAfter.stats)];
      const plainRate = Math.max(...plainRates);
      // The loop whose rate is the baseline gives every plain figure below.
      const plainBest = plainRates[0]! >= plainRates[1]! ? plainBefore : plainAfter;
      const plainMachineMs = (plainBest.machineCpu / deliveries) * 1000;
      const drainMachineMs = (drainMachineCpu / deliveries) * 1000;
      const mismatches = drain.mismatches + live.mismatches;
      const checked = drain.checked + live.checked;
      const duplicates = drain.duplicates + live.duplicates;
      const avgBody = (stats: ReceiverStats) => (stats.count > 0 ? stats.bytes / stats.count : 0);
      const perDelivery = (seconds: number) => fmt.ms((seconds / deliveries) * 1000);

      const section: Section = {
        title: `Webhook deliveries: ${deliveries} (${hookCount} webhooks × ${events} events) to a local HTTPS receiver`,
        rows: [
          {
            benchmark: `deliveries/s, backlog drain`,
            coffer: fmt.perSecond(drainRate, 'deliveries'),
            target: `≥ ${RATE_TARGET}/s`,
            met: drainRate >= RATE_TARGET,
          },
          {
            benchmark: `  vs plain undici loop (${loopConcurrency} in flight)`,
            coffer: fmt.perSecond(drainRate, 'deliveries'),
            baseline: `${fmt.perSecond(plainRate, 'POST')} plain`,
            ratio: drainRate / plainRate,
            target: `≥ ${fmt.ratio(RATIO_TARGET)}`,
            met: drainRate / plainRate >= RATIO_TARGET,
          },
          {
            // What binds once the two CPUs are busy: a rate is at most their seconds over the CPU of one
            // item, so the ratio is the drain's ceiling against the plain loop's, as the row above compares rates.
            benchmark: '  machine CPU per delivery (every process)',
            coffer: fmt.ms(drainMachineMs),
            baseline: `${fmt.ms(plainMachineMs)} per plain POST`,
            ratio: plainMachineMs / drainMachineMs,
          },
          {
            benchmark: '  end to end (events made while dispatching)',
            coffer: fmt.perSecond(liveRate, 'deliveries'),
            baseline: `${fmt.perSecond(plainRate, 'POST')} plain`,
            ratio: liveRate / plainRate,
          },
          {
            benchmark: '  signature mismatches (all checked)',
            coffer: `${mismatches} of ${checked}`,
            baseline: `${plainBefore.stats.mismatches + plainAfter.stats.mismatches} plain`,
            target: '0',
            met: mismatches === 0 && checked === 2 * deliveries,
          },
          {
            benchmark: '  every delivery once, and recorded delivered',
            coffer: `${drain.count + live.count - duplicates} unique of ${2 * deliveries}`,
            baseline: `${delivered} delivered, ${stillPending} pending`,
            target: 'all, once',
            met: duplicates === 0 && delivered === deliveries && stillPending === 0,
          },
        ],
        notes: [
          `method: ${hookCount} webhooks subscribed to file.uploaded, so each initiate (one event) makes ${hookCount} deliveries; ` +
            `the ${deliveries} deliveries of the drain were made while COFFER_WEBHOOK_RETRY_SCHEDULE held every first attempt back ` +
            `${HOLD_SECONDS} s (${fmt.perSecond(events / backlogSeconds, 'events')}, ${fmt.perSecond(deliveries / backlogSeconds, 'deliveries')} made; ` +
            `checked pending through GET /webhooks/{id}/deliveries?status=pending), then Coffer restarted on the same data with the first delay at 0: ` +
            "the drain rate is the receiver's count over its first-to-last arrival, dispatch alone",
          `drain: the restart took ${fmt.ms(readyAt - restartAt)} to /health/ready, the first delivery arrived ${fmt.ms(drain.first - restartAt)} after it began ` +
            `and the last ${((drain.last - drain.first) / 1000).toFixed(2)} s after the first; ` +
            `${fmt.perSecond(steadyRate(drain.arrivals), 'deliveries')} between the 10th and 90th percentile of arrivals; ` +
            `server CPU ${perDelivery(drainServerCpu)} per delivery (${drainServerCpu.toFixed(2)} s over ${((drain.last - drain.first) / 1000).toFixed(2)} s), ` +
            `receiver CPU ${perDelivery(drainReceiverCpu)}, every other process (the database server's included, the kernel's work) ` +
            `${perDelivery(drainMachineCpu - drainServerCpu - drainReceiverCpu)}; server RSS ${fmt.mib(rssBefore)} → ${fmt.mib(rssPeak)} peak`,
          `end to end: ${events} initiates (${initiateConcurrency} in flight) took ${((liveCreated - liveStart) / 1000).toFixed(2)} s ` +
            `(${fmt.perSecond((events * 1000) / (liveCreated - liveStart), 'events')}); last delivery ${((live.last - liveStart) / 1000).toFixed(2)} s after the first initiate; ` +
            `event → arrival p50 ${fmt.ms(percentile(live.delays, 50))}, p95 ${fmt.ms(percentile(live.delays, 95))}, max ${fmt.ms(Math.max(...live.delays))}; ` +
            `server CPU ${perDelivery(liveServerCpu)} per delivery (event included)`,
          `plain loop: this process → the receiver, ${loopConcurrency} in flight, keep-alive undici agent, each body built and HMAC-signed per request ` +
            `with the dispatcher's headers: ${plainRates.map((rate) => fmt.perSecond(rate, 'POST')).join(' before the drain, ')} after (the higher is the baseline); ` +
            `the baseline's client CPU ${fmt.ms((plainBest.clientCpu / deliveries) * 1000)}, receiver CPU ${fmt.ms((plainBest.receiverCpu / deliveries) * 1000)} per POST`,
          `bodies: ${avgBody(drain).toFixed(0)} bytes per delivery on average, ${avgBody(plainBefore.stats).toFixed(0)} per plain POST; ` +
            `TLS connections accepted by the receiver: ${drain.connections} during the drain, ${live.connections} end to end, ` +
            `${plainBefore.stats.connections} during a plain loop (after its warm-up)`,
          `receiver: bench/webhook-receiver.ts in its own process (node:https, self-signed certificate trusted by Coffer through ` +
            `${context.server.mode === 'child' ? 'NODE_EXTRA_CA_CERTS' : "the runtime's webhookCa"}), answers 200 once the body is read; ` +
            `Coffer: a ${context.server.mode === 'child' ? 'child process' : 'server in this process'} of this benchmark's own (${context.db === 'pglite' ? 'embedded PGlite' : 'PostgreSQL'}), ` +
            `COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS=true; dispatcher concurrency ${DISPATCHER_CONCURRENCY} requests in flight`,
        ],
      };
      return [section];
    } finally {
      await server?.close();
      await receiver.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
