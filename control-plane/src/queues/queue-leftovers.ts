// Finds, by tag, the queues this control plane made and nothing uses any more — left by a
// crash or a restart between two steps — and puts them away without losing a message: an
// output queue whose session is gone is drained back into its original queue and deleted; a
// temporary target queue whose workload no longer saves a split for it is drained back and
// deleted once the workload's rollout is done (otherwise its workload is reconciled, which
// restores the variable first). Only queues tagged with this cluster's own id are touched.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { ClusterSession } from "../../../proto/api/v1alpha1/index.js";
import type { ObjectKey } from "../runtime/index.js";
import { ConsumerConfigError, type ConsumerEnv, type ConsumerRef } from "./consumer-env.js";
import { QUEUE_TAGS } from "./queue-refs.js";
import type { SqsClients } from "./sqs-clients.js";
import { drainAndDelete, findTempQueues } from "./temp-queues.js";
import { rolloutDone } from "./workload-rollout.js";

export interface LeftoverSweepOptions {
  kubeConfig: KubeConfig;
  clients: SqsClients;
  consumerEnv: ConsumerEnv;
  clusterId: string;
  sessions: () => readonly ClusterSession[];
  /** Whether session `<namespace>:<name>` exists, read from the API server (not a cache). */
  sessionExists: (key: string) => Promise<boolean>;
  /** Asks for a workload's reconcile (`<kind>:<name>` keys). */
  enqueue: (key: ObjectKey) => void;
  logger?: Logger;
}

/** One pass; returns how many queues it put away. */
export async function sweepLeftoverQueues(o: LeftoverSweepOptions, signal: AbortSignal): Promise<number> {
  const mine = await findTempQueues(o.clients.local(), { [QUEUE_TAGS.owner]: o.clusterId });
  const sessions = new Set(o.sessions().map((s) => `${s.metadata.namespace}:${s.metadata.name}`));
  let putAway = 0;
  for (const q of mine) {
    if (signal.aborted) break;
    const original = q.tags[QUEUE_TAGS.original];
    if (!original) continue;
    if (q.tags[QUEUE_TAGS.role] === "output") {
      const session = q.tags[QUEUE_TAGS.session];
      // The cache may lag or be empty after a restart: only the API server says a session is gone.
      if (!session || sessions.has(session) || (await o.sessionExists(session))) continue;
      const moved = await drainAndDelete(o.clients, q.url, original, { signal });
      o.logger?.info({ session, moved }, "output queue of an ended session drained back and deleted");
      putAway++;
      continue;
    }
    const parts = q.tags[QUEUE_TAGS.consumer]?.split("/");
    if (parts?.length !== 4) continue;
    const [namespace, kind, name, id] = parts as [string, ConsumerRef["kind"], string, string];
    const ref: ConsumerRef = { namespace, kind, name };
    const saved = await o.consumerEnv.saved(ref).catch((err: unknown) => {
      if (err instanceof ConsumerConfigError) return undefined; // the workload is gone
      throw err;
    });
    if (saved?.[id]) {
      o.enqueue({ namespace, name: `${kind}:${name}` });
      continue;
    }
    if (saved && !(await rolloutDone(o.kubeConfig, ref))) continue;
    const moved = await drainAndDelete(o.clients, q.url, original, { signal });
    o.logger?.info(
      { namespace, consumer: `${kind}/${name}`, queue: id, moved },
      "leftover temporary queue drained back and deleted",
    );
    putAway++;
  }
  return putAway;
}
