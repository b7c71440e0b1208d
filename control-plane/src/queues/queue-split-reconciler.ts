// The member's queue split reconciler (DESIGN §7), one key per consuming workload
// (`<namespace>/<kind>:<name>`): for every queue id that a live session of that workload
// splits, it
//  1. makes the deployed consumers' temporary queue (a clone of the original, tagged) and
//     points the workload's variable at it (consumer-env.ts saves the original);
//  2. makes each session's output queue where this cluster owns them (single-cluster, or the
//     session's Default cluster: `spec.parent.defaultCluster`), or takes the Default's from
//     `connectParams.outputQueues`;
//  3. runs one splitter per queue with the sessions' filters in admission order (split-routing.ts);
//  4. reports `status.queues` and the overlap condition on each session.
// An ending session (deleted, our finalizer on it) leaves the routes first; its output queue
// is then drained back into the original queue and deleted, and only then is the finalizer
// released. When no live session splits a queue any more, the splitter stops, the variable is
// restored, and once the rollout finished the temporary queue is drained back and deleted.
// Everything but the splitters is read from the API server (and queue tags) on every call.
import type { Logger } from "pino";
import {
  parseTarget,
  type ClusterSession,
  type QueueConsumer,
  type QueueSplitStatus,
} from "../../../proto/api/v1alpha1/index.js";
import { withContext, type ObjectKey, type Reconciler, type ReconcileResult } from "../runtime/index.js";
import type { KubeConfig } from "@kubernetes/client-node";
import {
  ConsumerConfigError,
  type ConsumerEnv,
  type ConsumerQueueVar,
  type ConsumerRef,
} from "./consumer-env.js";
import { compileSplitFilter } from "./queue-filter.js";
import { QUEUE_SPLIT_FINALIZER, type QueueSplitStatusWriter } from "./queue-split-status.js";
import {
  admitted,
  containerOf,
  findQueue,
  held,
  keyOf,
  ownsOutputs,
  refused,
  splitsOf,
} from "./split-sessions.js";
import { admissionOrder, overlapMessage, overlapsWithEarlier, type SplitSession } from "./split-routing.js";
import type { SplitterRegistry } from "./splitter-registry.js";
import { queueNameOf, type SqsClients } from "./sqs-clients.js";
import { cloneQueue, drainAndDelete, findTempQueues, tempQueueName } from "./temp-queues.js";
import { rolloutDone } from "./workload-rollout.js";
import { consumerTag, QUEUE_TAGS, queueRef, type QueueRef } from "./queue-refs.js";

export interface QueueSplitReconcilerOptions {
  kubeConfig: KubeConfig;
  consumerEnv: ConsumerEnv;
  status: QueueSplitStatusWriter;
  clients: SqsClients;
  splitters: SplitterRegistry;
  /** This cluster's operator id: tagged on every queue it makes, so it only ever sweeps its own. */
  clusterId: string;
  sessions: () => readonly ClusterSession[];
  consumers: () => readonly QueueConsumer[];
  logger?: Logger;
  /** Re-check a waiting split this often, ms (default 2 000). */
  waitingRecheckMs?: number;
}

/** `<kind>:<name>` of a workload key. */
export function consumerKey(namespace: string, kind: string, name: string): ObjectKey {
  return { namespace, name: `${kind}:${name}` };
}

interface SessionWork {
  session: ClusterSession;
  entries: Map<string, QueueSplitStatus>;
  overlaps: string[];
  /** Output queues still to drain (keeps the finalizer). */
  pendingCleanup: boolean;
}

export class QueueSplitReconciler implements Reconciler {
  readonly #o: QueueSplitReconcilerOptions;
  readonly #recheckMs: number;
  /** `<namespace>/<kind>:<name>` → queue ids whose variable is restored and temporary queue not yet drained. */
  readonly #draining = new Map<string, Set<string>>();

  constructor(o: QueueSplitReconcilerOptions) {
    this.#o = o;
    this.#recheckMs = o.waitingRecheckMs ?? 2000;
  }

  async reconcile(key: ObjectKey, signal: AbortSignal): Promise<ReconcileResult> {
    const namespace = key.namespace!;
    const [kind, name] = key.name.split(":") as [string, string];
    const sessions = this.#o.sessions().filter((s) => {
      if (s.metadata.namespace !== namespace) return false;
      const t = parseTarget(s.spec.target);
      return t.kind === kind && t.name === name && (splitsOf(s).length > 0 || held(s));
    });
    const consumers = this.#o.consumers().filter((c) => {
      if (c.metadata.namespace !== namespace) return false;
      const [ck, rest] = c.spec.consumer.split("/") as [string, string];
      return ck === kind && rest === name;
    });
    const work = new Map<string, SessionWork>();
    for (const s of sessions) {
      let session = s;
      if (!s.metadata.deletionTimestamp && !refused(s) && splitsOf(s).length > 0)
        session = await this.#o.status.holdFinalizer(s);
      work.set(s.metadata.name!, { session, entries: new Map(), overlaps: [], pendingCleanup: false });
    }
    const ids = new Set<string>(sessions.flatMap((s) => splitsOf(s).map((q) => q.queueId)));
    for (const id of this.#o.splitters.queueIds(namespace, key.name)) ids.add(id);
    const workload: ConsumerRef = { namespace, kind: kind as ConsumerRef["kind"], name };
    const saved = await this.#o.consumerEnv.saved(workload).catch((err: unknown) => {
      if (err instanceof ConsumerConfigError) return {};
      throw err;
    });
    for (const id of Object.keys(saved)) ids.add(id);
    // Restored, but the temporary queue not drained back yet (a restart leaves that to the sweep).
    for (const id of this.#draining.get(`${namespace}/${key.name}`) ?? []) ids.add(id);
    let waiting = false;
    for (const id of ids) {
      const def = findQueue(consumers, id);
      const w = await this.#queue(namespace, key.name, kind, name, id, def, [...work.values()], signal);
      waiting ||= w;
    }
    for (const w of work.values()) {
      const s = w.session;
      if (s.metadata.deletionTimestamp) {
        if (!w.pendingCleanup) await this.#o.status.releaseFinalizer(s);
        else waiting = true;
        continue;
      }
      if (refused(s) || splitsOf(s).length === 0) continue;
      const queues = splitsOf(s).map(
        (q) =>
          w.entries.get(q.queueId) ?? {
            queueId: q.queueId,
            phase: "Waiting" as const,
            reason: "Pending",
            message: "not split yet",
          },
      );
      await this.#o.status.write(s, queues, w.overlaps.length > 0 ? w.overlaps.join("; ") : undefined);
      if (queues.some((q) => q.phase === "Waiting")) waiting = true;
    }
    return waiting ? { requeueAfterMs: this.#recheckMs } : undefined;
  }

  /** One queue id of one workload; true while something waits (a rollout, an output queue). */
  async #queue(
    namespace: string,
    keyName: string,
    kind: string,
    name: string,
    id: string,
    def: { consumer: QueueConsumer; queue: QueueConsumer["spec"]["queues"][number] } | undefined,
    all: SessionWork[],
    signal: AbortSignal,
  ): Promise<boolean> {
    const wants = (w: SessionWork) => splitsOf(w.session).find((q) => q.queueId === id);
    const live = all.filter((w) => wants(w) && !w.session.metadata.deletionTimestamp && !refused(w.session));
    const ending = all.filter((w) => wants(w) && w.session.metadata.deletionTimestamp);
    const fail = (w: SessionWork, reason: string, message: string) =>
      w.entries.set(id, { queueId: id, phase: "Failed", reason, message });
    if (!def) {
      for (const w of live)
        fail(
          w,
          "QueueNotConsumed",
          `no QueueConsumer in namespace ${namespace} names queue ${id} for ${kind}/${name}: ` +
            "create one that names the queue's id and the variable holding it",
        );
      for (const w of ending) w.pendingCleanup ||= await this.#dropOutput(w, id, undefined, signal);
      return false;
    }
    const ref: ConsumerRef = {
      namespace,
      kind: kind as ConsumerRef["kind"],
      name,
      ...(containerOf(def.consumer) ? { container: containerOf(def.consumer)! } : {}),
    };
    let original: QueueRef;
    let current: ConsumerQueueVar;
    try {
      current = await this.#o.consumerEnv.read(ref, def.queue);
      original = await queueRef(this.#o.clients, current.saved?.original ?? current.current);
    } catch (err) {
      if (!(err instanceof ConsumerConfigError)) throw err;
      for (const w of live) fail(w, err.reason, err.message);
      for (const w of ending) w.pendingCleanup ||= await this.#dropOutput(w, id, undefined, signal);
      return false;
    }
    // Routes first: an ending session stops getting messages before its queue is drained.
    const routes: SplitSession[] = [];
    let waiting = false;
    for (const w of admissionOrder(
      live.map((x) => ({ ...x, key: keyOf(x.session), admittedAt: admitted(x.session) })),
    )) {
      const split = wants(w)!;
      let filter;
      try {
        filter = compileSplitFilter(split);
      } catch (err) {
        fail(w, "InvalidFilter", `connectParams.sqsSplit[queueId=${id}].${(err as Error).message}`);
        continue;
      }
      const output = await this.#output(w.session, id, original, def.queue.envVar);
      if (!output) {
        w.entries.set(id, {
          queueId: id,
          phase: "Waiting",
          envVar: def.queue.envVar,
          reason: "OutputQueuePending",
          message: "waiting for the session's Default cluster to make its output queue",
        });
        waiting = true;
        continue;
      }
      const session: SplitSession = {
        key: w.key,
        admittedAt: w.admittedAt,
        mode: split.mode ?? "steal",
        filter,
        output: output.url,
      };
      const overlaps = overlapsWithEarlier(session, routes);
      if (overlaps.length > 0)
        w.overlaps.push(overlapMessage(id, { filter: filter.description, mode: session.mode }, overlaps));
      routes.push(session);
      w.entries.set(id, {
        queueId: id,
        phase: "Splitting",
        envVar: def.queue.envVar,
        outputQueueUrl: output.url,
        localValue: output.localValue,
        reason: "Splitting",
        message: `${session.mode === "steal" ? "matching messages go to" : "matching messages are copied to"} the output queue`,
      });
    }
    if (routes.length > 0) {
      const target = await this.#ensureTarget(ref, def, id, original, current);
      await this.#o.splitters.ensure(namespace, keyName, id, {
        original: original.url,
        target: target.url,
        routes,
      });
      // Until every pod reads the temporary queue, old pods still take messages from the
      // original one past the filter: the split is in force once the rollout is done.
      if (!(await rolloutDone(this.#o.kubeConfig, ref))) {
        for (const w of live) {
          const e = w.entries.get(id);
          if (e?.phase !== "Splitting") continue;
          w.entries.set(id, {
            ...e,
            phase: "Waiting",
            reason: "ConsumersRollingOut",
            message: `waiting for ${kind}/${name} to roll out onto the temporary queue`,
          });
        }
        waiting = true;
      }
    } else {
      this.#o.splitters.setRoutes(namespace, keyName, id, []);
    }
    for (const w of ending) w.pendingCleanup ||= await this.#dropOutput(w, id, original, signal);
    if (live.length === 0)
      waiting ||= await this.#unsplit(
        namespace,
        keyName,
        ref,
        id,
        original,
        current.saved !== undefined,
        signal,
      );
    return waiting;
  }

  /** The session's output queue: made here when this cluster owns it, else the Default's. */
  async #output(
    s: ClusterSession,
    id: string,
    original: QueueRef,
    envVar: string,
  ): Promise<{ url: string; localValue: string } | undefined> {
    const reported = s.status?.queues?.find((q) => q.queueId === id);
    if (!ownsOutputs(s)) {
      const map = s.spec.connectParams?.outputQueues ?? {};
      const url = Object.values(map).find((m) => m[id])?.[id];
      return url ? { url, localValue: url } : undefined;
    }
    if (reported?.outputQueueUrl && reported.localValue)
      return { url: reported.outputQueueUrl, localValue: reported.localValue };
    const tags = {
      [QUEUE_TAGS.owner]: this.#o.clusterId,
      [QUEUE_TAGS.role]: "output",
      [QUEUE_TAGS.original]: original.url,
      [QUEUE_TAGS.session]: keyOf(s),
    };
    // The informer may not show our own status write yet: a queue made by an earlier pass is
    // found by its tags instead of being made twice.
    const made = (await findTempQueues(this.#o.clients.local(), tags)).map((q) => q.url).sort();
    const url: string =
      made[0] ??
      (await cloneQueue(this.#o.clients, original.url, tempQueueName("o", original.name), tags).catch(
        (err: unknown): Promise<string> =>
          Promise.reject(
            withContext(`failed to make the output queue of ${keyOf(s)} for queue ${id} (${envVar})`, err),
          ),
      ));
    const name = queueNameOf(url);
    return { url, localValue: original.byUrl ? url : name };
  }

  async #ensureTarget(
    ref: ConsumerRef,
    def: { queue: QueueConsumer["spec"]["queues"][number] },
    id: string,
    original: QueueRef,
    current: ConsumerQueueVar,
  ): Promise<QueueRef> {
    if (current.saved && current.current === current.saved.temp)
      return queueRef(this.#o.clients, current.saved.temp);
    const name = tempQueueName("t", original.name);
    const url = await cloneQueue(this.#o.clients, original.url, name, {
      [QUEUE_TAGS.owner]: this.#o.clusterId,
      [QUEUE_TAGS.role]: "target",
      [QUEUE_TAGS.original]: original.url,
      [QUEUE_TAGS.consumer]: consumerTag(ref, id),
    });
    await this.#o.consumerEnv.pointAt(ref, def.queue, original.byUrl ? url : name);
    this.#o.logger?.info(
      { consumer: `${ref.kind}/${ref.name}`, namespace: ref.namespace, queue: id },
      "consumers pointed at their temporary queue",
    );
    return { url, name, byUrl: original.byUrl };
  }

  /** Drains an ending session's output queue back and deletes it; true while not done. */
  async #dropOutput(
    w: SessionWork,
    id: string,
    original: QueueRef | undefined,
    signal: AbortSignal,
  ): Promise<boolean> {
    const s = w.session;
    if (!ownsOutputs(s) || !s.metadata.finalizers?.includes(QUEUE_SPLIT_FINALIZER)) return false;
    const url = s.status?.queues?.find((q) => q.queueId === id)?.outputQueueUrl;
    if (!url) return false;
    // Without the original (its consumer's variable unreadable) the queue is left to the sweep.
    if (!original) return false;
    await drainAndDelete(this.#o.clients, url, original.url, { signal });
    this.#o.logger?.info({ session: keyOf(s), queue: id }, "session's output queue drained back and deleted");
    return false;
  }

  /**
   * No live session on the queue: stop its splitter, restore the variable, and once the
   * rollout that restoring started is done, drain the temporary queue(s) back into the
   * original and delete them (found by tag, so a restart in between loses none). True while
   * waiting for the rollout.
   */
  async #unsplit(
    namespace: string,
    keyName: string,
    ref: ConsumerRef,
    id: string,
    original: QueueRef,
    /** The workload still saves this split (read by the caller moments ago). */
    split: boolean,
    signal: AbortSignal,
  ): Promise<boolean> {
    await this.#o.splitters.stop(namespace, keyName, id);
    const drainKey = `${namespace}/${keyName}`;
    if (split) {
      await this.#o.consumerEnv.restore(ref, id);
      this.#o.logger?.info(
        { consumer: `${ref.kind}/${ref.name}`, namespace, queue: id },
        "consumers pointed back at their queue",
      );
    }
    const temps = await findTempQueues(this.#o.clients.local(), {
      [QUEUE_TAGS.owner]: this.#o.clusterId,
      [QUEUE_TAGS.role]: "target",
      [QUEUE_TAGS.consumer]: consumerTag(ref, id),
    });
    const draining = this.#draining.get(drainKey) ?? new Set<string>();
    if (temps.length > 0 && !(await rolloutDone(this.#o.kubeConfig, ref))) {
      this.#draining.set(drainKey, draining.add(id));
      return true;
    }
    draining.delete(id);
    if (draining.size === 0) this.#draining.delete(drainKey);
    for (const t of temps) {
      const moved = await drainAndDelete(this.#o.clients, t.url, original.url, { signal });
      this.#o.logger?.info({ namespace, queue: id, moved }, "temporary queue drained back and deleted");
    }
    return false;
  }
}
