// `sidecar` provisioning: the agent runs as a container in every pod of the target
// workload (see sidecar-pod-template.ts for how it takes over the app's ports). Adding
// it changes the pod template, so the workload rolls out a new ReplicaSet; the agents
// that serve are those in ready pods carrying our container with the current secret
// hash. Release puts the saved template back exactly — which makes the Deployment
// controller scale the original ReplicaSet back up — unless the workload was edited
// while patched, in which case only our containers are removed and the edit is kept.
// Writes are JSON patches (the chart grants `patch`, never `update`): `replace` of the
// whole template restores it exactly (a strategic merge would merge container lists),
// and the resourceVersion we read rides in the patch, so a concurrent edit answers 409.
// The redirect init container needs NET_ADMIN; a namespace whose PodSecurity level
// forbids that fails the session with the reason and the fix instead of a stuck rollout;
// ports a Service reaches by name (named targetPort) are taken by name and need no redirect.
import {
  AppsV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Deployment,
  type V1Pod,
  type V1PodTemplateSpec,
  type V1StatefulSet,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { integerIn, OptionError } from "../../../lib/option-error.js";
import { TerminalReconcileError } from "../runtime/index.js";
import {
  agentIdForPod,
  type AgentEndpoint,
  type AgentProvisioner,
  type EnsureAgentsInput,
  type EnsureAgentsResult,
} from "./agent-provisioner.js";
import { sha256Hex } from "./agent-secret-store.js";
import { readinessWithheldUntil } from "./target-resolver.js";
import { readWorkloadJson } from "./workload-json.js";
import {
  hasSidecar,
  injectSidecar,
  needsRedirect,
  ORIGINAL_TEMPLATE_ANNOTATION,
  PATCHED_TEMPLATE_ANNOTATION,
  SECRET_HASH_ANNOTATION,
  sidecarSecretHash,
  stripSidecar,
  templateHash,
  type SidecarSettings,
} from "./sidecar-pod-template.js";

export interface SidecarAgentProvisionerOptions extends SidecarSettings {
  kubeConfig: KubeConfig;
  /** Scheme of the agents' endpoint (default "wss" with `agentTlsSecret`, else "ws"). */
  scheme?: "ws" | "wss";
  logger?: Logger;
}

type Workload = V1Deployment | V1StatefulSet;

export class SidecarAgentProvisioner implements AgentProvisioner {
  readonly mode = "sidecar" as const;
  readonly #apps: AppsV1Api;
  readonly #core: CoreV1Api;
  readonly #kc: KubeConfig;
  readonly #settings: SidecarSettings;
  readonly #scheme: "ws" | "wss";
  readonly #agentPort: number;
  readonly #logger: Logger | undefined;

  constructor(options: SidecarAgentProvisionerOptions) {
    if (!options.agentImage || /\s/.test(options.agentImage)) {
      throw new OptionError("agentImage", `must be an image reference, got "${options.agentImage}"`);
    }
    const port = integerIn("agentPort", options.agentPort, 9440, 1, 65535);
    this.#apps = options.kubeConfig.makeApiClient(AppsV1Api);
    this.#core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#kc = options.kubeConfig;
    this.#settings = options;
    this.#scheme = options.scheme ?? (options.agentTlsSecret ? "wss" : "ws");
    this.#agentPort = port;
    this.#logger = options.logger;
  }

  async ensure({ resolved, secretHash }: EnsureAgentsInput): Promise<EnsureAgentsResult> {
    const { target, namespace } = resolved;
    if (target.kind === "pod") {
      throw new TerminalReconcileError(
        "SidecarUnsupported",
        `cannot add a sidecar agent to bare pod ${target.name}: a pod's containers cannot be changed; ` +
          "target its deployment or statefulset, or run the member with the process provisioner",
      );
    }
    const workload = await this.#read(target.kind, namespace, target.name);
    if (!workload)
      return {
        agents: [],
        waiting: { reason: "TargetNotFound", message: `${target.kind} ${target.name} is gone` },
      };
    const template = workload.spec!.template;
    if (!(hasSidecar(template.spec) && sidecarSecretHash(template) === secretHash)) {
      const annotations = workload.metadata!.annotations ?? {};
      const saved = annotations[ORIGINAL_TEMPLATE_ANNOTATION];
      // The original is what the template was before we touched it: the saved copy when our
      // sidecar is still in (only the secret changed), else the current template.
      const original: V1PodTemplateSpec = hasSidecar(template.spec)
        ? saved
          ? (JSON.parse(saved) as V1PodTemplateSpec)
          : stripSidecar(template)
        : template;
      const named = await this.#namedTargetPorts(namespace, original);
      if (needsRedirect(original, resolved.container, named)) await this.#checkPodSecurity(namespace);
      const patched = injectSidecar(original, resolved.container, secretHash, this.#settings, named);
      const written = await this.#patch(target.kind, workload, patched, {
        [ORIGINAL_TEMPLATE_ANNOTATION]: saved && hasSidecar(template.spec) ? saved : JSON.stringify(original),
        [PATCHED_TEMPLATE_ANNOTATION]: templateHash(patched),
      });
      await this.#recordStoredHash(target.kind, namespace, target.name, written);
      this.#logger?.info({ target: resolved.id }, "added the sidecar agent to the pod template");
    }
    // Ready pods first; then those whose readiness only the node controller took (API
    // server or kubelet unheard for a while) within the grace: their agents still run.
    const now = Date.now();
    const withheld = resolved.pods
      .map((pod) => ({ pod, until: readinessWithheldUntil(pod) }))
      .filter((w): w is { pod: V1Pod; until: number } => w.until !== undefined && w.until > now);
    const agents: AgentEndpoint[] = [...resolved.readyPods, ...withheld.map((w) => w.pod)]
      .filter((p) => hasSidecar(p.spec) && p.metadata?.annotations?.[SECRET_HASH_ANNOTATION] === secretHash)
      .map((pod) => ({
        id: agentIdForPod(pod.metadata!.name!, sha256Hex),
        pod,
        baseUrl: `${this.#scheme}://${hostForUrl(pod.status!.podIP!)}:${this.#agentPort}`,
      }));
    // Ready only once every pod of the target runs this agent: until the rollout has replaced
    // the last pod without it, some of the traffic the session must see still reaches the app.
    const without = resolved.pods.filter(
      (p) => !(hasSidecar(p.spec) && p.metadata?.annotations?.[SECRET_HASH_ANNOTATION] === secretHash),
    ).length;
    if (agents.length > 0 && without === 0)
      return withheld.length === 0
        ? { agents }
        : { agents, recheckAfterMs: Math.max(1, Math.min(...withheld.map((w) => w.until)) - now) };
    if (agents.length > 0)
      return {
        agents: [],
        waiting: {
          reason: "AgentStarting",
          message:
            `rollout in progress: ${resolved.pods.length - without} of ${resolved.pods.length} pods of ` +
            `${target.kind} ${target.name} run the agent sidecar; Ready when every pod does`,
        },
      };
    return resolved.readyPods.length === 0 && resolved.pods.length === 0
      ? { agents, waiting: { reason: "NoReadyPod", message: `${target.kind} ${target.name} has no pods` } }
      : {
          agents,
          waiting: {
            reason: "AgentStarting",
            message: `waiting for a ready pod of ${target.kind} ${target.name} running the agent sidecar (rollout in progress)`,
          },
        };
  }

  async release(target: { namespace: string; kind: string; name: string; id: string }): Promise<void> {
    if (target.kind !== "deployment" && target.kind !== "statefulset") return;
    const workload = await this.#read(target.kind, target.namespace, target.name);
    if (!workload) return;
    const annotations = workload.metadata!.annotations ?? {};
    const saved = annotations[ORIGINAL_TEMPLATE_ANNOTATION];
    const current = workload.spec!.template;
    if (saved === undefined && !hasSidecar(current.spec)) return;
    let restored: V1PodTemplateSpec;
    if (saved !== undefined && annotations[PATCHED_TEMPLATE_ANNOTATION] === templateHash(current)) {
      // The saved JSON as it is: no round trip through the typed model.
      restored = JSON.parse(saved) as V1PodTemplateSpec;
    } else {
      this.#logger?.warn(
        { target: target.id },
        "the pod template changed while the sidecar was in; removing only the sidecar and keeping the change",
      );
      restored = stripSidecar(current);
    }
    await this.#patch(target.kind, workload, restored, {
      [ORIGINAL_TEMPLATE_ANNOTATION]: undefined,
      [PATCHED_TEMPLATE_ANNOTATION]: undefined,
    });
    this.#logger?.info({ target: target.id }, "restored the original pod template");
  }

  /** The workload as the API server's JSON (see workload-json.ts: the typed model drops unknown fields). */
  async #read(
    kind: "deployment" | "statefulset",
    namespace: string,
    name: string,
  ): Promise<Workload | undefined> {
    return readWorkloadJson<Workload>(this.#kc, kind, namespace, name);
  }

  /**
   * One JSON patch: the template replaced whole, our annotations set (string) or removed
   * (undefined), and the resourceVersion we read as precondition (a concurrent edit → 409:
   * the reconciler re-reads and retries).
   */
  async #patch(
    kind: string,
    workload: Workload,
    template: V1PodTemplateSpec,
    ours: Record<string, string | undefined>,
  ): Promise<number> {
    return this.#patchOps(kind, workload, workloadPatch(workload, template, ours));
  }

  /** Applies JSON patch ops; returns the generation (spec version) the write produced. */
  async #patchOps(kind: string, workload: Workload, body: JsonPatchOp[]): Promise<number> {
    const namespace = workload.metadata!.namespace!;
    const name = workload.metadata!.name!;
    const json = setHeaderOptions("Content-Type", PatchStrategy.JsonPatch);
    const updated =
      kind === "deployment"
        ? await this.#apps.patchNamespacedDeployment({ namespace, name, body }, json)
        : await this.#apps.patchNamespacedStatefulSet({ namespace, name, body }, json);
    return updated.metadata!.generation ?? 0;
  }

  /**
   * The API server fills in defaults of what we wrote (probe timeouts, a fieldRef's apiVersion,
   * a container's termination message path, …), so the template it stores is not byte for byte
   * the one we hashed. Record the hash of the stored template instead, so that release tells our
   * own template from a user's edit. Only when the stored spec is still our write's generation:
   * an edit made meanwhile is someone else's and must not be taken for ours. (Generation, not
   * resourceVersion: the workload's controller writes its status all through a rollout, which
   * moves the resourceVersion but not the generation — a resourceVersion precondition lost that
   * race often enough that a rollout's own template was later taken for a user's edit.) The
   * patch tests the generation on the server, atomically with the write.
   */
  async #recordStoredHash(
    kind: "deployment" | "statefulset",
    namespace: string,
    name: string,
    generation: number,
  ): Promise<void> {
    const stored = await this.#read(kind, namespace, name);
    if (!stored || (stored.metadata!.generation ?? 0) !== generation) return;
    const hash = templateHash(stored.spec!.template);
    if (stored.metadata!.annotations?.[PATCHED_TEMPLATE_ANNOTATION] === hash) return;
    try {
      await this.#patchOps(kind, stored, [
        { op: "test", path: "/metadata/generation", value: generation },
        { op: "replace", path: `/metadata/annotations/${pointer(PATCHED_TEMPLATE_ANNOTATION)}`, value: hash },
      ]);
    } catch (err) {
      // The test failed: the spec was edited after our write, and that edit is not ours.
      const now = await this.#read(kind, namespace, name);
      if (!now || (now.metadata!.generation ?? 0) !== generation) return;
      throw err;
    }
  }

  /** Named targetPorts of the Services that select the template's pods: taken by name, no redirect. */
  async #namedTargetPorts(namespace: string, template: V1PodTemplateSpec): Promise<Set<string>> {
    const labels = template.metadata?.labels ?? {};
    const services = await this.#core.listNamespacedService({ namespace });
    const names = new Set<string>();
    for (const svc of services.items) {
      const selector = Object.entries(svc.spec?.selector ?? {});
      if (selector.length === 0 || !selector.every(([k, v]) => labels[k] === v)) continue;
      for (const port of svc.spec?.ports ?? []) {
        const target = port.targetPort as unknown;
        if ((port.protocol ?? "TCP") === "TCP" && typeof target === "string" && !/^\d+$/.test(target)) {
          names.add(target);
        }
      }
    }
    return names;
  }

  /** The redirect init container needs NET_ADMIN, which PodSecurity `baseline` and `restricted` forbid. */
  async #checkPodSecurity(namespace: string): Promise<void> {
    const ns = await this.#core.readNamespace({ name: namespace });
    const level = ns.metadata?.labels?.[POD_SECURITY_ENFORCE];
    if (level === "baseline" || level === "restricted") {
      throw new TerminalReconcileError(
        "PodSecurityForbidsRedirect",
        `namespace ${namespace} enforces PodSecurity "${level}", which forbids the NET_ADMIN capability ` +
          "the sidecar's port-redirect init container needs for ports no Service reaches by name; fix: " +
          "name the target container's ports and use those names as the Services' targetPort (taken by " +
          `name, no privilege), or label the namespace ${POD_SECURITY_ENFORCE}=privileged, or run the ` +
          "member with the process provisioner",
      );
    }
  }
}

const POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce";

type JsonPatchOp =
  { op: "add" | "replace" | "test"; path: string; value: unknown } | { op: "remove"; path: string };

/** RFC 6901: `~` and `/` in a key. */
export function pointer(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** The JSON patch that writes `template` and `ours` onto `workload` as read. */
export function workloadPatch(
  workload: Workload,
  template: V1PodTemplateSpec,
  ours: Record<string, string | undefined>,
): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [
    { op: "replace", path: "/metadata/resourceVersion", value: workload.metadata!.resourceVersion },
  ];
  const annotations = workload.metadata!.annotations;
  const set = Object.entries(ours).filter((e): e is [string, string] => e[1] !== undefined);
  if (!annotations) {
    if (set.length > 0)
      ops.push({ op: "add", path: "/metadata/annotations", value: Object.fromEntries(set) });
  } else {
    for (const [key, value] of Object.entries(ours)) {
      const path = `/metadata/annotations/${pointer(key)}`;
      if (value !== undefined) ops.push({ op: "add", path, value });
      else if (key in annotations) ops.push({ op: "remove", path });
    }
  }
  ops.push({ op: "replace", path: "/spec/template", value: template });
  return ops;
}

function hostForUrl(ip: string): string {
  return ip.includes(":") ? `[${ip}]` : ip;
}
