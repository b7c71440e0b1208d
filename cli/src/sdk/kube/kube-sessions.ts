// Sessions as Kubernetes objects, created with the user's own credentials (RBAC decides):
// a MultiClusterSession on the Primary in multi-cluster mode, a ClusterSession otherwise.
// The CLI generates the session secret and stores only its sha256 in the spec; it then
// watches the object until it is Ready (reporting per-cluster child state and its queue
// splits as it goes; with splits, until each is Splitting: session-queues.ts), Failed, or
// the wait times out, and deletes it when the session ends.
import { randomBytes } from "node:crypto";
import { Watch, type KubeConfig } from "@kubernetes/client-node";
import {
  API_VERSION,
  GROUP,
  LABELS,
  TTL_SECONDS_DEFAULT,
  clusterSessionClient,
  multiClusterSessionClient,
  parseTarget,
  type ClusterSession,
  type ConnectParams,
  type FailurePolicy,
  type MultiClusterSession,
  type SwitchyardOperator,
} from "../../../../proto/api/v1alpha1/index.js";
import { hashSecret, newSecret } from "../../../../proto/session-auth.js";
import { CliError, CliErrorCode } from "../cli-errors.js";
import { explainKubeError } from "./kube-access.js";
import { sessionModeOf, type SessionMode } from "./operator-info.js";
import { describeQueueProblems, queuesVerdict } from "./session-queues.js";
import {
  describeProblems,
  progressOfMulti,
  progressOfSingle,
  type SessionProgress,
} from "./session-progress.js";

export {
  describeProblems,
  progressOfMulti,
  progressOfSingle,
  type ClusterProgress,
  type SessionProgress,
} from "./session-progress.js";

const FIELD_MANAGER = "switchyard-cli";

export interface SessionRequest {
  /** e.g. deployment/myapp or deployment/myapp/container/app. */
  target: string;
  namespace: string;
  ttlSeconds?: number;
  failurePolicy?: FailurePolicy;
  connectParams?: ConnectParams;
  /** The object's name when chosen beforehand (`newSessionName`); default a fresh one. */
  name?: string;
}

/** A fresh session name for `mode`: `mc-<16 hex>` (multi-cluster) or `cs-<16 hex>`. */
export function newSessionName(mode: SessionMode): string {
  return `${mode === "multi-cluster" ? "mc" : "cs"}-${randomBytes(8).toString("hex")}`;
}

/** A created session: what is needed to attach to it and to delete it. */
export interface SessionHandle {
  id: string;
  namespace: string;
  mode: SessionMode;
  /** The secret whose sha256 is the spec's clientKeyHash. Never log it. */
  secret: string;
  target: string;
}

export interface SessionSummary {
  id: string;
  namespace: string;
  kind: "MultiClusterSession" | "ClusterSession";
  target: string;
  phase: string;
  clustersReady: number;
  clustersTotal: number;
  createdAt?: string;
  heartbeat?: string;
  parent?: string;
}

export interface WaitOptions {
  signal?: AbortSignal;
  /** Give up after this many ms (default 120 000). */
  timeoutMs?: number;
  onProgress?: (p: SessionProgress) => void;
  /** Queue ids of the session's splits: Ready also waits for each to be Splitting. */
  queues?: readonly string[];
}

export class KubeSessions {
  readonly #kc: KubeConfig;
  readonly #multi;
  readonly #single;

  constructor(kc: KubeConfig) {
    this.#kc = kc;
    this.#multi = multiClusterSessionClient(kc, { fieldManager: FIELD_MANAGER });
    this.#single = clusterSessionClient(kc, { fieldManager: FIELD_MANAGER });
  }

  /** Creates the session object the operator's mode calls for. */
  async create(req: SessionRequest, operator: SwitchyardOperator): Promise<SessionHandle> {
    try {
      parseTarget(req.target);
    } catch (err) {
      throw new CliError(CliErrorCode.INVALID_OPTION, (err as Error).message);
    }
    const mode = sessionModeOf(operator);
    const secret = newSecret();
    const id = req.name ?? newSessionName(mode);
    const spec = {
      target: req.target,
      clientKeyHash: hashSecret(secret),
      ttlSeconds: req.ttlSeconds ?? TTL_SECONDS_DEFAULT,
      ...(req.connectParams ? { connectParams: req.connectParams } : {}),
    };
    const labels = { [`${GROUP}/created-by`]: "switchyard-cli" };
    if (mode === "multi-cluster") {
      try {
        await this.#multi.create({
          metadata: { name: id, namespace: req.namespace, labels },
          spec: { ...spec, ...(req.failurePolicy ? { failurePolicy: req.failurePolicy } : {}) },
        });
      } catch (err) {
        throw explainKubeError(
          err,
          { verb: "create", resource: `multiclustersessions.${GROUP}`, namespace: req.namespace },
          this.#kc,
        );
      }
      return { id, namespace: req.namespace, mode, secret, target: req.target };
    }
    try {
      await this.#single.create({ metadata: { name: id, namespace: req.namespace, labels }, spec });
    } catch (err) {
      throw explainKubeError(
        err,
        { verb: "create", resource: `clustersessions.${GROUP}`, namespace: req.namespace },
        this.#kc,
      );
    }
    return { id, namespace: req.namespace, mode, secret, target: req.target };
  }

  /** The current progress, or undefined when the object is gone. */
  async progress(h: Pick<SessionHandle, "id" | "namespace" | "mode">, clusterName = "local") {
    const ref = { name: h.id, namespace: h.namespace };
    const plural = h.mode === "multi-cluster" ? "multiclustersessions" : "clustersessions";
    try {
      if (h.mode === "multi-cluster") {
        const s = await this.#multi.get(ref);
        return s ? { progress: progressOfMulti(s), resourceVersion: s.metadata.resourceVersion } : undefined;
      }
      const s = await this.#single.get(ref);
      return s
        ? { progress: progressOfSingle(s, clusterName), resourceVersion: s.metadata.resourceVersion }
        : undefined;
    } catch (err) {
      throw explainKubeError(
        err,
        { verb: "get", resource: `${plural}.${GROUP}`, namespace: h.namespace, name: h.id },
        this.#kc,
      );
    }
  }

  /**
   * Watches the session until it is Ready. Rejects with SWITCHYARD_CLI_SESSION_FAILED
   * (phase Failed, with every cluster's error), SESSION_NOT_FOUND (deleted meanwhile) or
   * SESSION_TIMEOUT (naming what was still missing).
   */
  async waitReady(h: SessionHandle, opts: WaitOptions = {}, clusterName = "local"): Promise<SessionProgress> {
    const timeoutMs = opts.timeoutMs ?? 120_000;
    const plural = h.mode === "multi-cluster" ? "multiclustersessions" : "clustersessions";
    let last: SessionProgress | undefined;
    let lastKey = "";
    const report = (p: SessionProgress) => {
      last = p;
      const key = JSON.stringify(p);
      if (key !== lastKey) {
        lastKey = key;
        opts.onProgress?.(p);
      }
    };
    const ids = opts.queues ?? [];
    const verdict = (p: SessionProgress): "ready" | "failed" | undefined => {
      if (p.phase === "Failed") return "failed";
      const queues = queuesVerdict(p.queues, ids);
      return queues === "failed" ? "failed" : p.phase === "Ready" && queues === "ready" ? "ready" : undefined;
    };
    const failed = (p: SessionProgress) =>
      p.phase !== "Failed"
        ? new CliError(
            CliErrorCode.QUEUE_SPLIT_FAILED,
            `session ${h.id} could not split its queues: ${describeQueueProblems(p.queues, ids)}. ` +
              "See `switchyard queues consumers` for the target's QueueConsumer and `switchyard queues status`.",
          )
        : new CliError(
            CliErrorCode.SESSION_FAILED,
            `session ${h.id} failed: ${describeProblems(p) || p.message || "no reason given"}. ` +
              "Check the target exists in every cluster and `switchyard status` for unreachable clusters.",
          );
    const holdUps = (p: SessionProgress) =>
      [describeProblems(p), describeQueueProblems(p.queues, ids)].filter(Boolean).join("; ");
    const deadline = Date.now() + timeoutMs;
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      for (;;) {
        if (opts.signal?.aborted) throw new CliError(CliErrorCode.CLOSED, "interrupted");
        const cur = await this.progress(h, clusterName);
        if (!cur)
          throw new CliError(
            CliErrorCode.SESSION_NOT_FOUND,
            `session ${h.id} in namespace ${h.namespace} was deleted while it was starting`,
          );
        report(cur.progress);
        const v = verdict(cur.progress);
        if (v === "ready") return cur.progress;
        if (v === "failed") throw failed(cur.progress);
        const remaining = deadline - Date.now();
        if (remaining <= 0)
          throw new CliError(
            CliErrorCode.SESSION_TIMEOUT,
            `session ${h.id} was not ready after ${Math.round(timeoutMs / 1000)} s (phase ${last?.phase ?? "?"}` +
              `${last && holdUps(last) ? `; ${holdUps(last)}` : ""}). ` +
              "Is the Switchyard control plane running? See `switchyard status`.",
          );
        // Watch from the version just read; a watch that ends (timeout, error) re-reads.
        const outcome = await new Promise<"ready" | "failed" | "gone" | "again">((resolve) => {
          const timer = setTimeout(() => resolve("again"), Math.min(remaining, 30_000));
          let ctl: AbortController | undefined;
          let finished = false;
          const finish = (r: "ready" | "failed" | "gone" | "again") => {
            if (finished) return;
            finished = true;
            clearTimeout(timer);
            stop.signal.removeEventListener("abort", abortWatch);
            ctl?.abort();
            resolve(r);
          };
          const abortWatch = () => finish("again");
          stop.signal.addEventListener("abort", abortWatch, { once: true });
          new Watch(this.#kc)
            .watch(
              `/apis/${API_VERSION}/namespaces/${h.namespace}/${plural}`,
              {
                fieldSelector: `metadata.name=${h.id}`,
                resourceVersion: cur.resourceVersion,
                allowWatchBookmarks: false,
              },
              (type, obj) => {
                if (type === "DELETED") return finish("gone");
                if (type !== "ADDED" && type !== "MODIFIED") return;
                const p =
                  h.mode === "multi-cluster"
                    ? progressOfMulti(obj as MultiClusterSession)
                    : progressOfSingle(obj as ClusterSession, clusterName);
                report(p);
                const v2 = verdict(p);
                if (v2) finish(v2);
              },
              () => setTimeout(() => finish("again"), 500),
            )
            .then(
              (c) => {
                // An open watch keeps the process alive: abort one that started late.
                ctl = c;
                if (finished) c.abort();
              },
              () => setTimeout(() => finish("again"), 500),
            );
        });
        if (outcome === "ready") return last!;
        if (outcome === "failed") throw failed(last!);
        if (outcome === "gone")
          throw new CliError(
            CliErrorCode.SESSION_NOT_FOUND,
            `session ${h.id} in namespace ${h.namespace} was deleted while it was starting`,
          );
      }
    } finally {
      opts.signal?.removeEventListener("abort", onAbort);
      stop.abort();
    }
  }

  /** Deletes a session; false when it was already gone. */
  async delete(h: Pick<SessionHandle, "id" | "namespace" | "mode">): Promise<boolean> {
    const client = h.mode === "multi-cluster" ? this.#multi : this.#single;
    try {
      return await client.delete({ name: h.id, namespace: h.namespace });
    } catch (err) {
      throw explainKubeError(
        err,
        {
          verb: "delete",
          resource: `${h.mode === "multi-cluster" ? "multiclustersessions" : "clustersessions"}.${GROUP}`,
          namespace: h.namespace,
          name: h.id,
        },
        this.#kc,
      );
    }
  }

  /**
   * Sessions visible to the user: parents and stand-alone ClusterSessions (children of a
   * parent are listed under their parent, not on their own). `namespace` undefined: all.
   */
  async list(namespace?: string): Promise<SessionSummary[]> {
    const where = namespace === undefined ? {} : { namespace };
    const out: SessionSummary[] = [];
    const multi = await this.#multi.list(where).catch((err: unknown) => {
      throw explainKubeError(
        err,
        { verb: "list", resource: `multiclustersessions.${GROUP}`, ...where },
        this.#kc,
      );
    });
    for (const s of multi.items) {
      const p = progressOfMulti(s);
      out.push({
        id: s.metadata.name!,
        namespace: s.metadata.namespace!,
        kind: "MultiClusterSession",
        target: s.spec.target,
        phase: p.phase,
        clustersReady: p.clusters.filter((c) => c.ready).length,
        clustersTotal: p.clusters.length,
        ...(s.metadata.creationTimestamp ? { createdAt: String(s.metadata.creationTimestamp) } : {}),
        ...(s.status?.connectedTimestamp ? { heartbeat: s.status.connectedTimestamp } : {}),
      });
    }
    const single = await this.#single.list(where).catch((err: unknown) => {
      throw explainKubeError(err, { verb: "list", resource: `clustersessions.${GROUP}`, ...where }, this.#kc);
    });
    for (const s of single.items) {
      const parent = s.spec.parent?.name ?? s.metadata.labels?.[LABELS.parent];
      out.push({
        id: s.metadata.name!,
        namespace: s.metadata.namespace!,
        kind: "ClusterSession",
        target: s.spec.target,
        phase: s.status?.phase ?? "Creating",
        clustersReady: s.status?.phase === "Ready" ? 1 : 0,
        clustersTotal: 1,
        ...(s.metadata.creationTimestamp ? { createdAt: String(s.metadata.creationTimestamp) } : {}),
        ...(parent ? { parent } : {}),
      });
    }
    return out.sort((a, b) => a.namespace.localeCompare(b.namespace) || a.id.localeCompare(b.id));
  }
}

/** "mc-…" ids are MultiClusterSessions, anything else a ClusterSession. */
export function modeOfId(id: string): SessionMode {
  return id.startsWith("mc-") && id.length === 19 ? "multi-cluster" : "single-cluster";
}
