/** The webhook benchmark's own Coffer server, its webhooks, events and deliveries. */
import { call, expectStatus, type Project } from './client.ts';
import { type CofferServer, startCoffer } from './coffer-server.ts';
import type { WebhookReceiver } from './helper-servers.ts';
import { ADMIN_KEY, type BenchContext } from './lib.ts';
import { pool } from './measure.ts';

const RETRY_TAIL = '30,300,3600,21600';

export interface Hook {
  id: string;
  path: string;
}

/** Starts the benchmark's own Coffer on `dataDir`, holding first attempts back by `holdSeconds`. */
export function startServer(
  context: BenchContext,
  dataDir: string,
  receiver: WebhookReceiver,
  holdSeconds: number,
): Promise<CofferServer> {
  return startCoffer(dataDir, context.server.mode, {
    env: {
      COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      COFFER_WEBHOOK_RETRY_SCHEDULE: `${holdSeconds},${RETRY_TAIL}`,
    },
    caFile: receiver.caFile,
    workers: true,
  });
}

export async function deliveryTotal(server: CofferServer, projectId: string, hook: Hook, status: string) {
  const reply = await call<{ total: number; items: { last_error: string | null }[] }>(
    'GET',
    `${server.url}/v1/projects/${projectId}/webhooks/${hook.id}/deliveries?status=${status}`,
    { token: ADMIN_KEY },
  );
  expectStatus(reply, 200, 'list deliveries');
  return reply.body;
}

/** How many deliveries of every hook have `status`, summed. */
export async function countDeliveries(
  server: CofferServer,
  projectId: string,
  hooks: Hook[],
  status: string,
) {
  let total = 0;
  for (const hook of hooks) total += (await deliveryTotal(server, projectId, hook, status)).total;
  return total;
}

/** `count` initiates (one file.uploaded event each), `concurrency` in flight; seconds taken. */
export async function makeEvents(
  project: Project,
  from: number,
  count: number,
  concurrency: number,
): Promise<void> {
  await pool(count, concurrency, async (i) => {
    const reply = await project.api('POST', '/files/upload', {
      filename: `webhook-bench-${String(from + i).padStart(6, '0')}.bin`,
      content_type: 'application/octet-stream',
      size_bytes: 1024,
    });
    expectStatus(reply, 201, 'initiate');
  });
}
