// Whether a pod being created is born with the agent, and with which secret: its owner must
// opt in (the workload's annotation `switchyard.dev/inject-agent: "true"`, or its namespace's
// label `switchyard.dev/inject-agent=enabled`) and lie within the install's allow-list, which no
// annotation widens. The secret is the target's agent secret (../member/agent-secret-store.ts),
// so a later session's routing table carries the one the pod's agent accepts.
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { SessionAllowList, type SessionAllowListOptions } from "../allow-list/index.js";
import { INJECT_ANNOTATION, INJECT_NAMESPACE_LABEL } from "../member/agent-annotations.js";
import { AgentSecretStore } from "../member/agent-secret-store.js";
import { selectorMatches } from "../member/label-selector.js";
import { namedTargetPorts, redirectForbiddenBy } from "../member/named-target-ports.js";
import { needsRedirect, type SidecarSettings } from "../member/sidecar-pod-template.js";
import { targetId } from "../member/target-resolver.js";
import { podInjectionPatch, podOwner, type JsonPatchOp } from "./pod-injection.js";

export type Decision =
  | { inject: true; patch: JsonPatchOp[]; target: string }
  /** `warning` is shown to whoever created the pod (kubectl prints admission warnings). */
  | { inject: false; why: string; warning?: string };

export interface InjectionPolicyOptions {
  kubeConfig: KubeConfig;
  settings: SidecarSettings;
  allowList?: SessionAllowListOptions;
  /** Where agent Secrets live (the member's `secretNamespace`; default: each target's namespace). */
  secretNamespace?: string;
  now?: () => Date;
}

export class InjectionPolicy {
  readonly #apps: AppsV1Api;
  readonly #core: CoreV1Api;
  readonly #secrets: AgentSecretStore;
  readonly #allow: SessionAllowList;
  readonly #o: InjectionPolicyOptions;

  constructor(o: InjectionPolicyOptions) {
    this.#apps = o.kubeConfig.makeApiClient(AppsV1Api);
    this.#core = o.kubeConfig.makeApiClient(CoreV1Api);
    this.#secrets = new AgentSecretStore(o.kubeConfig, o.secretNamespace);
    this.#allow = new SessionAllowList(o.allowList);
    this.#o = o;
  }

  /** What to do with `pod`, created in `namespace`; `dryRun` creates no Secret (sideEffects NoneOnDryRun). */
  async decide(pod: V1Pod, namespace: string, dryRun: boolean): Promise<Decision> {
    const owner = podOwner(pod);
    if (!owner) return { inject: false, why: "not a Deployment's or StatefulSet's pod" };
    const target = `${owner.kind}/${owner.name}`;
    if (!this.#allow.check(namespace, target).allowed)
      return { inject: false, why: `${namespace}/${target} is outside the install's allow-list` };
    const workload =
      owner.kind === "deployment"
        ? await this.#apps.readNamespacedDeployment({ namespace, name: owner.name }).catch(() => undefined)
        : await this.#apps.readNamespacedStatefulSet({ namespace, name: owner.name }).catch(() => undefined);
    if (!workload || !selectorMatches(workload.spec?.selector, pod.metadata?.labels))
      return { inject: false, why: `no ${target} selects the pod` };
    let optedIn = workload.metadata?.annotations?.[INJECT_ANNOTATION] === "true";
    if (!optedIn) {
      const ns = await this.#core.readNamespace({ name: namespace });
      optedIn = ns.metadata?.labels?.[INJECT_NAMESPACE_LABEL] === "enabled";
    }
    if (!optedIn) return { inject: false, why: `${target} has not opted in` };
    const container = pod.spec?.containers[0]?.name;
    if (!container) return { inject: false, why: "the pod has no container" };
    const named = await namedTargetPorts(this.#core, namespace, pod.metadata?.labels ?? {});
    const podAsTemplate = { metadata: {}, spec: pod.spec! };
    if (needsRedirect(podAsTemplate, container, named)) {
      const level = await redirectForbiddenBy(this.#core, namespace);
      if (level) {
        const warning =
          `switchyard: ${namespace}/${target} opted in to the agent, but namespace ${namespace} enforces ` +
          `PodSecurity "${level}", which forbids the NET_ADMIN its port redirect needs: the pod starts without ` +
          "the agent. Fix: use the container ports' names as the Services' targetPort, or label the namespace privileged";
        return { inject: false, why: `PodSecurity ${level}`, warning };
      }
    }
    const id = targetId(namespace, owner);
    if (dryRun) return { inject: false, why: "dry run: no agent secret is made" };
    const secret = await this.#secrets.ensure(namespace, id);
    const patch = podInjectionPatch(
      pod,
      container,
      secret.hash,
      this.#o.settings,
      named,
      (this.#o.now ?? (() => new Date()))(),
    );
    if (!patch) return { inject: false, why: "the pod already carries the agent" };
    return { inject: true, patch, target: id };
  }
}
