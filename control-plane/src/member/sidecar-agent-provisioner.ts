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
// When the last session ends the agent may stay as an idle pass-through (the linger, recorded
// on the workload: agent-linger.ts), so the next session attaches with no template change; a
// target whose pods were all born with the agent (the admission webhook) is attached as it is.
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
  type AgentTarget,
  type EnsureAgentsInput,
  type EnsureAgentsResult,
  type IdleOutcome,
} from "./agent-provisioner.js";
import {
  INJECT_ANNOTATION,
  INJECT_NAMESPACE_LABEL,
  INJECTED_AT_ANNOTATION,
  LINGER_UNTIL_ANNOTATION,
  REMOVE_REQUESTED_ANNOTATION,
} from "./agent-annotations.js";
import { lingerAnnotationProblem, lingerSecondsFor, lingerUntil, lingerUntilValue } from "./agent-linger.js";
import { sha256Hex } from "./agent-secret-store.js";
import { readinessWithheldUntil } from "./target-resolver.js";
import { namedTargetPorts, POD_SECURITY_ENFORCE, redirectForbiddenBy } from "./named-target-ports.js";
import { readWorkloadJson } from "./workload-json.js";
import { annotationsPatch, pointer, workloadPatch, type JsonPatchOp } from "./workload-patch.js";

export { pointer, workloadPatch } from "./workload-patch.js";
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
  /**
   * Seconds an idle agent stays after the last session on its workload (-1 = until removed;
   * default 0 = restore at once). The control plane passes `--agent-linger-seconds`.
   */
  lingerSeconds?: number;
  /** Clock, for tests (default Date.now). */
  now?: () => number;
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
  readonly #lingerSeconds: number;
  readonly #now: () => number;

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
    this.#lingerSeconds = integerIn("lingerSeconds", options.lingerSeconds, 0, -1, 30 * 86_400);
    this.#now = options.now ?? Date.now;
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
    const templated = hasSidecar(template.spec) && sidecarSecretHash(template) === secretHash;
    if (!templated && allBornWithAgent(resolved.pods, secretHash)) {
      // Every pod was born with this agent (the admission webhook): attach as they are.
    } else if (templated) {
      // The agent lingered since the last session: this one attaches, no template change.
      if (workload.metadata!.annotations?.[LINGER_UNTIL_ANNOTATION] !== undefined) {
        await this.#patchOps(
          target.kind,
          workload,
          annotationsPatch(workload, { [LINGER_UNTIL_ANNOTATION]: undefined }),
        );
        this.#logger?.info({ target: resolved.id }, "a session attached to the lingering agent");
      }
    } else {
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
        [INJECTED_AT_ANNOTATION]: new Date(this.#now()).toISOString(),
        [LINGER_UNTIL_ANNOTATION]: undefined,
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

  /**
   * The last session ended: record how long the agent idles (the workload's own annotation, else
   * the install's linger), or restore now when that is 0. A workload whose pods are born with
   * the agent keeps them (and its secret): nothing of its template is ours.
   */
  async idle(target: AgentTarget): Promise<IdleOutcome> {
    if (target.kind !== "deployment" && target.kind !== "statefulset") return { kind: "released" };
    const workload = await this.#read(target.kind, target.namespace, target.name);
    if (!workload) return { kind: "released" };
    const annotations = workload.metadata!.annotations ?? {};
    if (annotations[ORIGINAL_TEMPLATE_ANNOTATION] === undefined && !hasSidecar(workload.spec!.template.spec))
      return (await this.#optedIn(workload)) ? { kind: "born" } : { kind: "released" };
    const problem = lingerAnnotationProblem(annotations);
    if (problem) this.#logger?.warn({ target: target.id }, problem);
    const seconds = lingerSecondsFor(annotations, this.#lingerSeconds);
    if (seconds === 0) {
      await this.release(target);
      return { kind: "released" };
    }
    const value = lingerUntilValue(this.#now(), seconds);
    if (annotations[LINGER_UNTIL_ANNOTATION] !== value)
      await this.#patchOps(
        target.kind,
        workload,
        annotationsPatch(workload, { [LINGER_UNTIL_ANNOTATION]: value }),
      );
    this.#logger?.info(
      { target: target.id, until: value },
      "last session on the target ended; the agent stays idle until then",
    );
    return { kind: "lingering", until: lingerUntil({ [LINGER_UNTIL_ANNOTATION]: value })! };
  }

  /**
   * `switchyard agents remove` while sessions still use the agent: the last of them ending
   * restores at once (the mark wins over any linger). Nothing to mark when nothing is ours.
   */
  async requestRemoval(target: AgentTarget): Promise<boolean> {
    if (target.kind !== "deployment" && target.kind !== "statefulset") return false;
    const workload = await this.#read(target.kind, target.namespace, target.name);
    if (!workload || workload.metadata!.annotations?.[ORIGINAL_TEMPLATE_ANNOTATION] === undefined)
      return false;
    if (workload.metadata!.annotations[REMOVE_REQUESTED_ANNOTATION] === undefined)
      await this.#patchOps(
        target.kind,
        workload,
        annotationsPatch(workload, { [REMOVE_REQUESTED_ANNOTATION]: new Date(this.#now()).toISOString() }),
      );
    return true;
  }

  async carries(target: AgentTarget): Promise<"template" | "born" | "none"> {
    if (target.kind !== "deployment" && target.kind !== "statefulset") return "none";
    const workload = await this.#read(target.kind, target.namespace, target.name);
    if (!workload) return "none";
    if (
      workload.metadata!.annotations?.[ORIGINAL_TEMPLATE_ANNOTATION] !== undefined ||
      hasSidecar(workload.spec!.template.spec)
    )
      return "template";
    return (await this.#optedIn(workload)) ? "born" : "none";
  }

  /** Whether the workload's pods are born with the agent: it, or its namespace, opted in. */
  async #optedIn(workload: Workload): Promise<boolean> {
    if (workload.metadata!.annotations?.[INJECT_ANNOTATION] === "true") return true;
    const ns = await this.#core.readNamespace({ name: workload.metadata!.namespace! });
    return ns.metadata?.labels?.[INJECT_NAMESPACE_LABEL] === "enabled";
  }

  async release(target: AgentTarget): Promise<void> {
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
      [INJECTED_AT_ANNOTATION]: undefined,
      [LINGER_UNTIL_ANNOTATION]: undefined,
      [REMOVE_REQUESTED_ANNOTATION]: undefined,
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
  #namedTargetPorts(namespace: string, template: V1PodTemplateSpec): Promise<Set<string>> {
    return namedTargetPorts(this.#core, namespace, template.metadata?.labels ?? {});
  }

  /** The redirect init container needs NET_ADMIN, which PodSecurity `baseline` and `restricted` forbid. */
  async #checkPodSecurity(namespace: string): Promise<void> {
    const level = await redirectForbiddenBy(this.#core, namespace);
    if (level) {
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

/** Every pod of the target (at least one) carries the agent with this secret hash from birth. */
function allBornWithAgent(pods: readonly V1Pod[], secretHash: string): boolean {
  return (
    pods.length > 0 &&
    pods.every((p) => hasSidecar(p.spec) && p.metadata?.annotations?.[SECRET_HASH_ANNOTATION] === secretHash)
  );
}

function hostForUrl(ip: string): string {
  return ip.includes(":") ? `[${ip}]` : ip;
}
