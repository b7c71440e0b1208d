// `sidecar` provisioning: the agent runs as a container in every pod of the target
// workload (see sidecar-pod-template.ts for how it takes over the app's ports). Adding
// it changes the pod template, so the workload rolls out a new ReplicaSet; the agents
// that serve are those in ready pods carrying our container with the current secret
// hash. Release puts the saved template back exactly — which makes the Deployment
// controller scale the original ReplicaSet back up — unless the workload was edited
// while patched, in which case only our containers are removed and the edit is kept.
import {
  ApiException,
  AppsV1Api,
  type KubeConfig,
  type V1Deployment,
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
import {
  hasSidecar,
  injectSidecar,
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
  /** Scheme of the agents' endpoint: "ws" (default) or "wss" when the agent serves TLS. */
  scheme?: "ws" | "wss";
  logger?: Logger;
}

type Workload = V1Deployment | V1StatefulSet;

export class SidecarAgentProvisioner implements AgentProvisioner {
  readonly mode = "sidecar" as const;
  readonly #apps: AppsV1Api;
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
    this.#settings = options;
    this.#scheme = options.scheme ?? "ws";
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
          ? parseTemplate(saved)
          : stripSidecar(template)
        : template;
      const patched = injectSidecar(original, resolved.container, secretHash, this.#settings);
      workload.metadata!.annotations = {
        ...annotations,
        [ORIGINAL_TEMPLATE_ANNOTATION]: JSON.stringify(original),
        [PATCHED_TEMPLATE_ANNOTATION]: templateHash(patched),
      };
      workload.spec!.template = patched;
      await this.#replace(target.kind, workload);
      this.#logger?.info({ target: resolved.id }, "added the sidecar agent to the pod template");
    }
    const agents: AgentEndpoint[] = resolved.readyPods
      .filter((p) => hasSidecar(p.spec) && p.metadata?.annotations?.[SECRET_HASH_ANNOTATION] === secretHash)
      .map((pod) => ({
        id: agentIdForPod(pod.metadata!.name!, sha256Hex),
        pod,
        baseUrl: `${this.#scheme}://${hostForUrl(pod.status!.podIP!)}:${this.#agentPort}`,
      }));
    if (agents.length > 0) return { agents };
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
    const annotations = { ...(workload.metadata!.annotations ?? {}) };
    const saved = annotations[ORIGINAL_TEMPLATE_ANNOTATION];
    const current = workload.spec!.template;
    if (saved === undefined && !hasSidecar(current.spec)) return;
    let restored: V1PodTemplateSpec;
    if (saved !== undefined && annotations[PATCHED_TEMPLATE_ANNOTATION] === templateHash(current)) {
      restored = parseTemplate(saved);
    } else {
      this.#logger?.warn(
        { target: target.id },
        "the pod template changed while the sidecar was in; removing only the sidecar and keeping the change",
      );
      restored = stripSidecar(current);
    }
    delete annotations[ORIGINAL_TEMPLATE_ANNOTATION];
    delete annotations[PATCHED_TEMPLATE_ANNOTATION];
    workload.metadata!.annotations = annotations;
    workload.spec!.template = restored;
    await this.#replace(target.kind, workload);
    this.#logger?.info({ target: target.id }, "restored the original pod template");
  }

  async #read(kind: string, namespace: string, name: string): Promise<Workload | undefined> {
    try {
      return kind === "deployment"
        ? await this.#apps.readNamespacedDeployment({ namespace, name })
        : await this.#apps.readNamespacedStatefulSet({ namespace, name });
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  }

  /** PUT with the resourceVersion we read: a concurrent edit answers 409 (a conflict: re-read, retry). */
  async #replace(kind: string, workload: Workload): Promise<void> {
    const namespace = workload.metadata!.namespace!;
    const name = workload.metadata!.name!;
    if (kind === "deployment") {
      await this.#apps.replaceNamespacedDeployment({ namespace, name, body: workload as V1Deployment });
    } else {
      await this.#apps.replaceNamespacedStatefulSet({ namespace, name, body: workload as V1StatefulSet });
    }
  }
}

function parseTemplate(json: string): V1PodTemplateSpec {
  const t = JSON.parse(json) as V1PodTemplateSpec;
  // The typed serializer wants Date objects where the API has timestamps.
  const ts = t.metadata?.creationTimestamp as unknown;
  if (typeof ts === "string") t.metadata!.creationTimestamp = new Date(ts);
  return t;
}

function hostForUrl(ip: string): string {
  return ip.includes(":") ? `[${ip}]` : ip;
}
