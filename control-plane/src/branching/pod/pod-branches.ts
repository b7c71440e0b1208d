// The `pod` provisioner (DESIGN §7): each branch is a database Pod of a configured image plus
// a ClusterIP Service, in the branch CR's namespace of the Default cluster
// (branch-pod-objects.ts). The pod seeds itself from the source, so the control plane never
// connects to a branch or a source and needs no client tools: it creates the objects, then
// watches the pod until it is Ready (the image's real server listens only once seeding is
// done), or fails.
//
// Idempotent by name: a Ready pod of the branch is returned as it is; one still seeding from
// the same spec is waited for; any other (stopped, failed, made from another spec) is deleted
// and made again. A seed that exits non-zero is terminal, quoting the redacted tail of the
// container's termination message (its log); so is an image the node cannot pull. Either
// way the pod, Service and seed Secret are deleted at once (nothing keeps retrying against
// the source). `drop` deletes the three (absent is success) and waits for the pod to go.
import {
  ApiException,
  CoreV1Api,
  type KubeConfig,
  type V1Pod,
  type V1Secret,
  type V1Service,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import type {
  BranchCreateRequest,
  BranchProvisioner,
  BranchRef,
  ProvisionedBranch,
} from "../branch-provisioner.js";
import { BranchError } from "../branch-error.js";
import { isGeneratedBranchName } from "../branch-identifiers.js";
import {
  BRANCH_POD_SPEC_ANNOTATION,
  branchPodName,
  branchPodObjects,
  DATABASE_CONTAINER,
  MARIADB_POD_ENGINE,
  madeForBranch,
  POSTGRES_POD_ENGINE,
  seedSecretName,
  type BranchPodSettings,
  type PodEngine,
} from "./branch-pod-objects.js";
import { redact } from "../postgres/pg-session.js";

export const BRANCH_POD_FAILED = "SWITCHYARD_BRANCH_POD_FAILED";

/** A pod branch that could not be made; terminal when retrying cannot help. Never holds a password. */
export class BranchPodError extends BranchError {
  readonly code = BRANCH_POD_FAILED;
}

export interface PodBranchesOptions extends BranchPodSettings {
  /** The cluster branches are made in (the Default cluster: the control plane's own). */
  kubeConfig: KubeConfig;
  logger: Logger;
  /** How long `create` waits for the pod to be Ready before a retryable error, ms (default 600 000). */
  readyTimeoutMs?: number;
  /** Longest pause between two reads of the pod, ms (default 250; the first is 100): Ready is seen within a quarter second. */
  pollMs?: number;
  /** The option that sets the image, quoted when the image cannot be pulled. */
  imageOption?: string;
}

// Reasons the kubelet gives while it cannot get the image; none resolves by waiting.
const IMAGE_UNAVAILABLE = new Set([
  "ErrImagePull",
  "ImagePullBackOff",
  "ErrImageNeverPull",
  "InvalidImageName",
]);
// What the termination message keeps: the end of the log holds the failing command's error.
const MESSAGE_TAIL = 1500;

type PodState =
  | { state: "ready" }
  | { state: "starting"; detail: string }
  | { state: "seedFailed"; detail: string }
  | { state: "imageUnavailable"; detail: string }
  | { state: "stopped"; detail: string };

/** Where a branch pod is, from its status alone. */
export function branchPodState(pod: V1Pod): PodState {
  const status = pod.status;
  const c = status?.containerStatuses?.find((s) => s.name === DATABASE_CONTAINER);
  if (pod.metadata?.deletionTimestamp) return { state: "stopped", detail: "it is being deleted" };
  const waiting = c?.state?.waiting;
  if (waiting?.reason && IMAGE_UNAVAILABLE.has(waiting.reason))
    return { state: "imageUnavailable", detail: `${waiting.reason}: ${waiting.message ?? ""}`.trim() };
  const ended = c?.state?.terminated ?? c?.lastState?.terminated;
  if (ended && ended.exitCode !== 0) {
    const why = ended.reason && ended.reason !== "Error" ? `, ${ended.reason}` : "";
    const log = (ended.message ?? "").trim();
    return {
      state: "seedFailed",
      detail: `exit code ${ended.exitCode}${why}${log ? `: ${log.slice(-MESSAGE_TAIL)}` : ""}`,
    };
  }
  if (status?.phase === "Failed" || status?.phase === "Succeeded")
    return { state: "stopped", detail: `phase ${status.phase}${status.reason ? ` (${status.reason})` : ""}` };
  const ready = status?.conditions?.some((x) => x.type === "Ready" && x.status === "True");
  if (ready && c?.ready) return { state: "ready" };
  if (waiting?.reason)
    return { state: "starting", detail: `${waiting.reason} ${waiting.message ?? ""}`.trim() };
  const unscheduled = status?.conditions?.find((x) => x.type === "PodScheduled" && x.status === "False");
  if (unscheduled)
    return { state: "starting", detail: `not scheduled: ${unscheduled.message ?? unscheduled.reason}` };
  if (c?.state?.running) return { state: "starting", detail: "seeding (the server does not listen yet)" };
  return { state: "starting", detail: `phase ${status?.phase ?? "unknown"}` };
}

const notFound = (err: unknown) => err instanceof ApiException && err.code === 404;

async function orUndefined<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (notFound(err)) return undefined;
    throw err;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export class PodBranches implements BranchProvisioner {
  readonly name = "pod" as const;
  readonly #engine: PodEngine;
  readonly #o: PodBranchesOptions;
  readonly #core: CoreV1Api;

  constructor(engine: PodEngine, o: PodBranchesOptions) {
    if (!o.image.trim())
      throw new BranchPodError("NoImage", "the pod provisioner needs an image", "terminal");
    this.#engine = engine;
    this.#o = o;
    this.#core = o.kubeConfig.makeApiClient(CoreV1Api);
  }

  describe(): string {
    return `pod: image ${this.#o.image} per branch in the branch's namespace (port ${this.#engine.port})`;
  }

  async create(request: BranchCreateRequest, signal: AbortSignal): Promise<ProvisionedBranch> {
    const { kind } = this.#engine;
    const id = request.identifiers;
    if (
      !isGeneratedBranchName(kind, id.database, "database") ||
      !isGeneratedBranchName(kind, id.user, "user")
    )
      throw new BranchPodError(
        "NameRefused",
        `${id.database}/${id.user} is not a generated branch name`,
        "terminal",
      );
    const objects = branchPodObjects(this.#engine, request, this.#o);
    const { name } = objects;
    const namespace = request.cr.namespace;
    const where = `pod ${namespace}/${name}`;
    const secrets = [request.source.password, id.password];
    const started = Date.now();
    let pod = await orUndefined(this.#core.readNamespacedPod({ namespace, name }));
    if (pod && !madeForBranch(pod.metadata, name))
      throw new BranchPodError(
        "PodConflict",
        `Pod ${name} in namespace ${namespace} exists and is not this branch's; delete it or give the branch another name`,
        "terminal",
      );
    if (pod) {
      const s = branchPodState(pod);
      const sameSpec =
        pod.metadata?.annotations?.[BRANCH_POD_SPEC_ANNOTATION] ===
        objects.pod.metadata!.annotations![BRANCH_POD_SPEC_ANNOTATION];
      if (s.state !== "ready" && !(s.state === "starting" && sameSpec)) {
        this.#o.logger.info({ kind, namespace, pod: name, state: s.state }, "branch pod made again");
        await this.#deletePod(namespace, name, signal);
        pod = undefined;
      }
    }
    await this.#apply(namespace, name, "Secret", objects.seedSecret);
    await this.#apply(namespace, name, "Service", objects.service);
    if (!pod) await this.#core.createNamespacedPod({ namespace, body: objects.pod });
    try {
      await this.#waitReady(namespace, name, signal);
    } catch (err) {
      if (!(err instanceof BranchPodError)) throw err;
      // Nothing keeps trying against the source, and the source password goes with the pod.
      if (err.kind === "terminal") await this.#deleteObjects(namespace, name).catch(() => undefined);
      throw new BranchPodError(err.reason, redact(`${where}: ${err.message}`, secrets), err.kind);
    }
    this.#o.logger.info({ kind, namespace, pod: name, ms: Date.now() - started }, "branch pod ready");
    return {
      branchName: id.database,
      host: `${name}.${namespace}.svc`,
      port: this.#engine.port,
      user: id.user,
      password: id.password,
    };
  }

  async drop(branch: BranchRef, signal: AbortSignal): Promise<void> {
    if (!isGeneratedBranchName(branch.kind, branch.branchName, "database"))
      throw new BranchPodError(
        "NameRefused",
        `${branch.branchName} is not a generated branch name`,
        "terminal",
      );
    const name = branchPodName(branch.branchName);
    await this.#deleteObjects(branch.cr.namespace, name);
    await this.#waitGone(branch.cr.namespace, name, undefined, signal);
  }

  async #waitReady(namespace: string, name: string, signal: AbortSignal): Promise<void> {
    const deadline = Date.now() + (this.#o.readyTimeoutMs ?? 600_000);
    let pause = 100;
    for (;;) {
      if (signal.aborted) throw signal.reason as Error;
      const pod = await orUndefined(this.#core.readNamespacedPod({ namespace, name }));
      if (!pod) throw new BranchPodError("PodStopped", "the pod was deleted while it started", "transient");
      const s = branchPodState(pod);
      switch (s.state) {
        case "ready":
          return;
        case "seedFailed":
          throw new BranchPodError("SeedFailed", `seeding the branch failed (${s.detail})`, "terminal");
        case "imageUnavailable":
          throw new BranchPodError(
            "ImageUnavailable",
            `the node cannot get image ${this.#o.image} (${s.detail}); set ` +
              `${this.#o.imageOption ?? "the pod provisioner's image"} to an image the nodes can pull`,
            "terminal",
          );
        case "stopped":
          throw new BranchPodError("PodStopped", `the pod stopped: ${s.detail}`, "transient");
        case "starting":
          if (Date.now() > deadline)
            throw new BranchPodError(
              "PodNotReady",
              `not Ready after ${this.#o.readyTimeoutMs ?? 600_000} ms: ${s.detail}`,
              "transient",
            );
      }
      await sleep(pause, signal);
      pause = Math.min(pause * 2, this.#o.pollMs ?? 250);
    }
  }

  /** Creates the branch's object, or replaces one of ours of that name (a foreign one is an error). */
  async #apply(
    namespace: string,
    branch: string,
    what: "Secret" | "Service",
    body: V1Secret | V1Service,
  ): Promise<void> {
    const core = this.#core;
    const name = body.metadata!.name!;
    try {
      if (what === "Secret") await core.createNamespacedSecret({ namespace, body });
      else await core.createNamespacedService({ namespace, body });
      return;
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 409)) throw err;
    }
    const existing =
      what === "Secret"
        ? await core.readNamespacedSecret({ namespace, name })
        : await core.readNamespacedService({ namespace, name });
    if (!madeForBranch(existing.metadata, branch))
      throw new BranchPodError(
        `${what}Conflict`,
        `${what} ${name} in namespace ${namespace} exists and is not this branch's; delete it or give the branch another name`,
        "terminal",
      );
    // A Service's spec is the same for the branch's whole life; the seed Secret may change.
    if (what === "Secret") await core.replaceNamespacedSecret({ namespace, name, body });
  }

  async #deletePod(namespace: string, name: string, signal: AbortSignal): Promise<void> {
    const pod = await orUndefined(this.#core.readNamespacedPod({ namespace, name }));
    if (!pod) return;
    const uid = pod.metadata!.uid!;
    await orUndefined(
      this.#core.deleteNamespacedPod({
        namespace,
        name,
        body: { preconditions: { uid }, gracePeriodSeconds: 1 },
      }),
    );
    await this.#waitGone(namespace, name, uid, signal);
  }

  /** Deletes the branch's Pod, Service and seed Secret that carry its label (absent is fine). */
  async #deleteObjects(namespace: string, name: string): Promise<void> {
    const core = this.#core;
    const secret = seedSecretName(name);
    const pod = await orUndefined(core.readNamespacedPod({ namespace, name }));
    if (pod && madeForBranch(pod.metadata, name))
      await orUndefined(
        core.deleteNamespacedPod({
          namespace,
          name,
          body: { preconditions: { uid: pod.metadata!.uid! }, gracePeriodSeconds: 1 },
        }),
      );
    const service = await orUndefined(core.readNamespacedService({ namespace, name }));
    if (service && madeForBranch(service.metadata, name))
      await orUndefined(core.deleteNamespacedService({ namespace, name }));
    const seed = await orUndefined(core.readNamespacedSecret({ namespace, name: secret }));
    if (seed && madeForBranch(seed.metadata, name))
      await orUndefined(core.deleteNamespacedSecret({ namespace, name: secret }));
  }

  /** Until the pod (of `uid`, if given) is gone; 60 s at most. */
  async #waitGone(
    namespace: string,
    name: string,
    uid: string | undefined,
    signal: AbortSignal,
  ): Promise<void> {
    const deadline = Date.now() + 60_000;
    for (let pause = 100; ; pause = Math.min(pause * 2, 1000)) {
      const pod = await orUndefined(this.#core.readNamespacedPod({ namespace, name }));
      if (!pod || !madeForBranch(pod.metadata, name) || (uid && pod.metadata?.uid !== uid)) return;
      if (Date.now() > deadline)
        throw new BranchPodError(
          "PodNotDeleted",
          `pod ${namespace}/${name} is still there after 60 s`,
          "transient",
        );
      await sleep(pause, signal);
    }
  }
}

/** The Postgres `pod` provisioner: the official `postgres` image's contract. */
export class PgPodBranches extends PodBranches {
  constructor(o: PodBranchesOptions) {
    super(POSTGRES_POD_ENGINE, o);
  }
}

/** The MySQL/MariaDB `pod` provisioner: the official `mariadb` image's contract. */
export class MysqlPodBranches extends PodBranches {
  constructor(o: PodBranchesOptions) {
    super(MARIADB_POD_ENGINE, o);
  }
}
