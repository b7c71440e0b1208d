// Points a consuming workload's queue variable at a temporary queue and back (DESIGN §7).
// The original value is saved in an annotation on the workload itself
// (`switchyard.dev/split-queues`: queue id → {container, envVar, original, temp}) in the same
// write that changes the variable, so a restarted control plane finds what to restore in the
// API server, and restoring writes back exactly the value that was there. Each write is a
// JSON patch that tests the resourceVersion it read: a concurrent edit makes it fail (and the
// reconcile retry) instead of overwriting. Workloads are read as the API server's own JSON
// (workload-json.ts) so that no field of a newer API server is dropped.
import { AppsV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from "@kubernetes/client-node";
import { GROUP, type ConsumedQueue } from "../../../proto/api/v1alpha1/index.js";
import { pointer } from "../member/sidecar-agent-provisioner.js";
import { readWorkloadJson } from "../member/workload-json.js";
import { ConflictReconcileError } from "../runtime/index.js";

export const SPLIT_QUEUES_ANNOTATION = `${GROUP}/split-queues`;

export interface SavedQueueVar {
  container: string;
  envVar: string;
  /** The value before the split: restored exactly. */
  original: string;
  /** The temporary queue the consumers read meanwhile (URL or name, as the original). */
  temp: string;
}

export interface ConsumerRef {
  namespace: string;
  kind: "deployment" | "statefulset";
  name: string;
  /** Container whose variable names the queue (default: the first that has it). */
  container?: string;
}

/** The workload or its variable is not as a split needs it: retrying will not help. */
export class ConsumerConfigError extends Error {
  override readonly name = "ConsumerConfigError";
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

interface EnvVarJson {
  name: string;
  value?: string;
  valueFrom?: unknown;
}
interface WorkloadJson {
  metadata: { resourceVersion: string; annotations?: Record<string, string> };
  spec: { template: { spec: { containers: { name: string; env?: EnvVarJson[] }[] } } };
}

export interface ConsumerQueueVar {
  /** What is saved for this queue (present while split). */
  saved: SavedQueueVar | undefined;
  /** The variable's current value. */
  current: string;
  container: string;
}

const describeRef = (r: ConsumerRef) => `${r.kind}/${r.name} in namespace ${r.namespace}`;

function savedVars(w: WorkloadJson): Record<string, SavedQueueVar> {
  const raw = w.metadata.annotations?.[SPLIT_QUEUES_ANNOTATION];
  if (!raw) return {};
  try {
    const parsed = JSON.parse(raw) as unknown;
    return parsed && typeof parsed === "object" ? (parsed as Record<string, SavedQueueVar>) : {};
  } catch {
    return {};
  }
}

function locate(w: WorkloadJson, ref: ConsumerRef, queue: ConsumedQueue) {
  const containers = w.spec.template.spec.containers;
  const candidates = ref.container ? containers.filter((c) => c.name === ref.container) : containers;
  if (ref.container && candidates.length === 0)
    throw new ConsumerConfigError(
      "ContainerNotFound",
      `${describeRef(ref)} has no container ${ref.container}: fix the QueueConsumer's spec.consumer`,
    );
  for (const [ci, c] of containers.entries()) {
    if (!candidates.includes(c)) continue;
    const ei = (c.env ?? []).findIndex((e) => e.name === queue.envVar);
    if (ei < 0) continue;
    const e = c.env![ei]!;
    if (e.valueFrom !== undefined || typeof e.value !== "string" || e.value === "")
      throw new ConsumerConfigError(
        "QueueVariableNotPlain",
        `container ${c.name} of ${describeRef(ref)} sets ${queue.envVar} with valueFrom or to nothing: ` +
          `splitting queue ${queue.id} needs the queue's URL or name as a plain value`,
      );
    return { ci, ei, container: c.name, value: e.value };
  }
  throw new ConsumerConfigError(
    "QueueVariableNotFound",
    `no container of ${describeRef(ref)}${ref.container ? ` named ${ref.container}` : ""} sets ${queue.envVar}: ` +
      `fix spec.queues[id=${queue.id}].envVar of its QueueConsumer`,
  );
}

export class ConsumerEnv {
  readonly #kc: KubeConfig;
  readonly #apps: AppsV1Api;

  constructor(kc: KubeConfig) {
    this.#kc = kc;
    this.#apps = kc.makeApiClient(AppsV1Api);
  }

  async #read(ref: ConsumerRef): Promise<WorkloadJson> {
    const w = await readWorkloadJson<WorkloadJson>(this.#kc, ref.kind, ref.namespace, ref.name);
    if (!w)
      throw new ConsumerConfigError(
        "ConsumerNotFound",
        `${describeRef(ref)} does not exist: fix the QueueConsumer's spec.consumer`,
      );
    return w;
  }

  /** What splits saved on the workload: queue id → saved variable. */
  async saved(ref: ConsumerRef): Promise<Record<string, SavedQueueVar>> {
    return savedVars(await this.#read(ref));
  }

  /** The queue variable as it is now, and what a split saved of it. */
  async read(ref: ConsumerRef, queue: ConsumedQueue): Promise<ConsumerQueueVar> {
    const w = await this.#read(ref);
    const at = locate(w, ref, queue);
    return { saved: savedVars(w)[queue.id], current: at.value, container: at.container };
  }

  /** Sets the variable to `temp`, saving the original once; returns what is saved. */
  async pointAt(ref: ConsumerRef, queue: ConsumedQueue, temp: string): Promise<SavedQueueVar> {
    const w = await this.#read(ref);
    const at = locate(w, ref, queue);
    const saved = savedVars(w);
    const mine = saved[queue.id];
    if (mine && at.value === mine.temp) return mine;
    const entry: SavedQueueVar = {
      container: at.container,
      envVar: queue.envVar,
      // Already split (a temp we no longer use): keep the true original.
      original: mine?.original ?? at.value,
      temp,
    };
    await this.#write(ref, w, { ...saved, [queue.id]: entry }, [{ ci: at.ci, ei: at.ei, value: temp }]);
    return entry;
  }

  /** Writes the original value back and forgets it; false when nothing was saved. */
  async restore(ref: ConsumerRef, queueId: string): Promise<boolean> {
    const w = await this.#read(ref);
    const saved = savedVars(w);
    const mine = saved[queueId];
    if (!mine) return false;
    const containers = w.spec.template.spec.containers;
    const ci = containers.findIndex((c) => c.name === mine.container);
    const ei = ci < 0 ? -1 : (containers[ci]!.env ?? []).findIndex((e) => e.name === mine.envVar);
    const rest = { ...saved };
    delete rest[queueId];
    // A variable someone removed or rewrote meanwhile is theirs now: only forget ours.
    const value = ei >= 0 ? containers[ci]!.env![ei]!.value : undefined;
    const sets = ei >= 0 && value === mine.temp ? [{ ci, ei, value: mine.original }] : [];
    await this.#write(ref, w, rest, sets);
    return true;
  }

  async #write(
    ref: ConsumerRef,
    w: WorkloadJson,
    saved: Record<string, SavedQueueVar>,
    sets: { ci: number; ei: number; value: string }[],
  ): Promise<void> {
    const annotationPath = `/metadata/annotations/${pointer(SPLIT_QUEUES_ANNOTATION)}`;
    const ops: { op: string; path: string; value?: unknown }[] = [
      { op: "test", path: "/metadata/resourceVersion", value: w.metadata.resourceVersion },
    ];
    const empty = Object.keys(saved).length === 0;
    if (!w.metadata.annotations) {
      if (!empty) ops.push({ op: "add", path: "/metadata/annotations", value: {} });
    }
    if (empty) {
      if (w.metadata.annotations?.[SPLIT_QUEUES_ANNOTATION] !== undefined)
        ops.push({ op: "remove", path: annotationPath });
    } else ops.push({ op: "add", path: annotationPath, value: JSON.stringify(saved) });
    for (const s of sets)
      ops.push({
        op: "replace",
        path: `/spec/template/spec/containers/${s.ci}/env/${s.ei}/value`,
        value: s.value,
      });
    const json = setHeaderOptions("Content-Type", PatchStrategy.JsonPatch);
    const args = { namespace: ref.namespace, name: ref.name, body: ops };
    try {
      if (ref.kind === "deployment") await this.#apps.patchNamespacedDeployment(args, json);
      else await this.#apps.patchNamespacedStatefulSet(args, json);
    } catch (err) {
      // A failed `test` answers 422 like an invalid patch: it is a conflict when the workload
      // changed since it was read.
      const code = (err as { code?: number }).code;
      const changed =
        code === 409 ||
        (code === 422 &&
          (await this.#read(ref).catch(() => w)).metadata.resourceVersion !== w.metadata.resourceVersion);
      if (changed)
        throw new ConflictReconcileError(
          `${describeRef(ref)} changed while its queue variable was being set`,
          {
            cause: err,
          },
        );
      throw err;
    }
  }
}
