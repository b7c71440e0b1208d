// Restores a workload whose idle agent's linger ran out. Keyed by workload (`<kind>/<name>` in
// the key's name), woken by the Deployment and StatefulSet watches of workloads that carry a
// linger record and requeued for the moment it ends; the record is read from the API server
// on every pass, so a control plane that restarted or took over leadership meanwhile restores
// on time (its first pass over the informers' cache finds every record). A record of `never`
// waits for `switchyard agents remove`.
import type { KubeConfig, V1Deployment, V1StatefulSet } from "@kubernetes/client-node";
import type { ObjectKey, Reconciler, ReconcileResult } from "../runtime/index.js";
import { LINGER_UNTIL_ANNOTATION } from "./agent-annotations.js";
import { lingerUntil } from "./agent-linger.js";
import type { IdleAgents } from "./idle-agents.js";
import { targetId } from "./target-resolver.js";
import { readWorkloadJson } from "./workload-json.js";

type WorkloadKind = "deployment" | "statefulset";

/** How soon an expired linger whose target a session took meanwhile is looked at again, ms. */
export const IN_USE_RECHECK_MS = 30_000;

/** The queue key of a workload: its namespace, and `<kind>/<name>` as the name. */
export function lingerKey(kind: WorkloadKind, w: V1Deployment | V1StatefulSet): ObjectKey | undefined {
  const namespace = w.metadata?.namespace;
  const name = w.metadata?.name;
  if (!namespace || !name || w.metadata?.annotations?.[LINGER_UNTIL_ANNOTATION] === undefined)
    return undefined;
  return { namespace, name: `${kind}/${name}` };
}

export interface LingerReconcilerOptions {
  kubeConfig: KubeConfig;
  idle: IdleAgents;
  now?: () => number;
}

export class LingerReconciler implements Reconciler {
  readonly #o: LingerReconcilerOptions;
  readonly #now: () => number;

  constructor(o: LingerReconcilerOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
  }

  async reconcile(key: ObjectKey, signal: AbortSignal): Promise<ReconcileResult> {
    const [kind, name] = key.name.split("/") as [WorkloadKind, string];
    const namespace = key.namespace!;
    const workload = await readWorkloadJson<V1Deployment | V1StatefulSet>(
      this.#o.kubeConfig,
      kind,
      namespace,
      name,
    );
    const until = lingerUntil(workload?.metadata?.annotations);
    if (until === undefined || until === "never") return;
    const left = until - this.#now();
    // A little past the record: the timer never fires a hair early.
    if (left > 0) return { requeueAfterMs: left + 50 };
    const target = { namespace, kind, name, id: targetId(namespace, { kind, name }) };
    // In use again: that session's first pass clears the record; look again in case it never does
    // (a session deleted before it was served).
    if (!(await this.#o.idle.expire(target, signal))) return { requeueAfterMs: IN_USE_RECHECK_MS };
  }
}
