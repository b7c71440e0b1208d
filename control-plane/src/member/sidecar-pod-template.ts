// The sidecar's change to a workload's pod template, as pure functions. The agent
// takes over the target container's TCP ports the way a mesh sidecar does: the app
// keeps listening on its own ports (we cannot move an arbitrary app to another port),
// an init container installs iptables PREROUTING REDIRECT rules that send traffic
// arriving at the pod for port P to the agent's port L, and the agent forwards to the
// app on 127.0.0.1:P (locally originated traffic does not pass PREROUTING, so there is
// no loop). Services stay untouched; containers are added, and the app container's
// kubelet probes on those ports move to agent relay ports that always reach the app
// (sidecar-probes.ts). A port a Service reaches by name (named targetPort) is instead taken by name: the
// agent declares that port name on its listen port and the app's port loses it, so the
// Service's endpoints point at the agent with no privilege (and no init container).
// The original template is kept in an annotation so it can be put back exactly.
import { createHash } from "node:crypto";
import type { V1Container, V1PodSpec, V1PodTemplateSpec, V1SecurityContext } from "@kubernetes/client-node";
import { OptionError } from "../../../lib/option-error.js";
import { GROUP } from "../../../proto/api/v1alpha1/index.js";
import { COMPONENT_MAIN, PRODUCT_IMAGE_COMMAND } from "../../../proto/product-image.js";
import { PROBE_PORTS_ANNOTATION, relayProbes, restoreProbes } from "./sidecar-probes.js";
import { agentTargetView } from "./sidecar-target-view.js";

export const AGENT_CONTAINER = "switchyard-agent";
export const REDIRECT_CONTAINER = "switchyard-redirect";
/** Pod volume of the agent's TLS Secret, and where the agent container mounts it. */
export const AGENT_TLS_VOLUME = "switchyard-agent-tls";
export const AGENT_TLS_MOUNT = "/var/run/switchyard/agent-tls";
/**
 * Pod volume (an emptyDir: it outlives a container restart, not the pod) where the agent keeps
 * its subscriptions, so that a restarted agent knows its sessions before it accepts traffic.
 */
export const AGENT_STATE_VOLUME = "switchyard-agent-state";
export const AGENT_STATE_MOUNT = "/var/run/switchyard/agent-state";
/** On the workload: JSON of the pod template before the sidecar was added. */
export const ORIGINAL_TEMPLATE_ANNOTATION = `${GROUP}/original-pod-template`;
/** On the workload: sha256 of the template as we wrote it (detects edits made meanwhile). */
export const PATCHED_TEMPLATE_ANNOTATION = `${GROUP}/patched-pod-template-sha256`;
/** On the pod template: the agent secret hash this sidecar accepts. */
export const SECRET_HASH_ANNOTATION = `${GROUP}/agent-secret-sha256`;

/**
 * The agent needs no privilege: it listens on unprivileged ports, reads the target's env from
 * its own (copied) env and the target's volumes and its TLS files from read-only mounts, and
 * writes nothing but its log to stdout and its subscriptions to its own emptyDir,
 * so it fits PodSecurity `restricted` (the image's numeric USER satisfies runAsNonRoot).
 * A fresh object per call: templates are edited and compared as plain data.
 */
function agentSecurityContext(): V1SecurityContext {
  return {
    runAsNonRoot: true,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ["ALL"] },
    seccompProfile: { type: "RuntimeDefault" },
  };
}

export interface SidecarSettings {
  /** Agent image (the data-plane/agent build). */
  agentImage: string;
  /**
   * Image with `sh` and `iptables` for the redirect init container. The product image has
   * neither, so pods with redirected ports need it (injectSidecar refuses without it).
   */
  redirectImage?: string;
  /** Agent protocol port in the pod (default 9440). */
  agentPort?: number;
  /** First port tried for redirected traffic (default 15100); ports used in the pod are skipped. */
  trafficPortBase?: number;
  imagePullPolicy?: string;
  /**
   * kubernetes.io/tls Secret in the target's namespace (keys tls.crt, tls.key): when set the
   * agent serves wss:// with it (mounted read-only); pods wait for the Secret to exist.
   */
  agentTlsSecret?: string;
}

export interface PortMapping {
  appPort: number;
  listenPort: number;
}

/** Stable JSON (sorted keys), for hashing templates. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
}

export function templateHash(template: V1PodTemplateSpec | undefined): string {
  return createHash("sha256")
    .update(canonicalJson(template ?? {}))
    .digest("hex");
}

/** The agent container of a pod spec: a native sidecar, or (templates patched before) a regular container. */
function agentContainer(spec: V1PodSpec | undefined): V1Container | undefined {
  return (
    spec?.initContainers?.find((c) => c.name === AGENT_CONTAINER) ??
    spec?.containers.find((c) => c.name === AGENT_CONTAINER)
  );
}

export function hasSidecar(spec: V1PodSpec | undefined): boolean {
  return agentContainer(spec) !== undefined;
}

/** Secret hash the template's sidecar accepts, if it has one. */
export function sidecarSecretHash(template: V1PodTemplateSpec | undefined): string | undefined {
  return hasSidecar(template?.spec) ? template?.metadata?.annotations?.[SECRET_HASH_ANNOTATION] : undefined;
}

/** TCP ports of the target container and the agent ports that take them over. */
export function portMappings(
  spec: V1PodSpec,
  container: string,
  base = 15100,
  agentPort = 9440,
): PortMapping[] {
  const used = new Set<number>([agentPort]);
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
    for (const p of c.ports ?? []) used.add(p.containerPort);
  }
  const target = spec.containers.find((c) => c.name === container);
  const appPorts = [
    ...new Set(
      (target?.ports ?? []).filter((p) => (p.protocol ?? "TCP") === "TCP").map((p) => p.containerPort),
    ),
  ];
  let next = base;
  return appPorts.map((appPort) => {
    while (used.has(next)) next++;
    used.add(next);
    return { appPort, listenPort: next++ };
  });
}

/**
 * The mappings split by how traffic reaches the agent: ports whose name is in `namedPorts`
 * (a Service's named targetPort) are taken by name — the agent declares that port name on
 * its own listen port and the app's port loses the name, so the Service's endpoints point at
 * the agent with no privilege at all; every other port needs the iptables redirect.
 */
export function splitMappings(
  spec: V1PodSpec,
  container: string,
  namedPorts: ReadonlySet<string>,
  base?: number,
  agentPort?: number,
): { byName: (PortMapping & { name: string })[]; redirected: PortMapping[] } {
  const target = spec.containers.find((c) => c.name === container);
  const nameOf = (port: number) =>
    target?.ports?.find((p) => p.containerPort === port && (p.protocol ?? "TCP") === "TCP")?.name;
  const byName: (PortMapping & { name: string })[] = [];
  const redirected: PortMapping[] = [];
  for (const m of portMappings(spec, container, base, agentPort)) {
    const name = nameOf(m.appPort);
    if (name !== undefined && namedPorts.has(name)) byName.push({ ...m, name });
    else redirected.push(m);
  }
  return { byName, redirected };
}

/** Whether injecting into `container` adds the redirect init container (TCP ports not taken by name). */
export function needsRedirect(
  template: V1PodTemplateSpec,
  container: string,
  namedPorts: ReadonlySet<string> = new Set(),
): boolean {
  return template.spec ? splitMappings(template.spec, container, namedPorts).redirected.length > 0 : false;
}

/** The redirect rules as one sh script: traffic from outside the pod for P goes to L. */
export function redirectScript(mappings: readonly PortMapping[]): string {
  const lines = [
    "set -e",
    "iptables -t nat -N SWITCHYARD_INBOUND 2>/dev/null || iptables -t nat -F SWITCHYARD_INBOUND",
    "iptables -t nat -C PREROUTING -p tcp -j SWITCHYARD_INBOUND 2>/dev/null || iptables -t nat -A PREROUTING -p tcp -j SWITCHYARD_INBOUND",
    ...mappings.map(
      (m) =>
        `iptables -t nat -A SWITCHYARD_INBOUND -p tcp --dport ${m.appPort} -j REDIRECT --to-ports ${m.listenPort}`,
    ),
  ];
  return lines.join("\n");
}

/**
 * A copy of `template` with the agent container added, and the redirect init container for
 * the ports not taken by name (`namedPorts`: the named targetPorts of the Services in front).
 * The agent container carries copies of the target's env and volume mounts
 * (sidecar-target-view.ts), so it serves env and files with no API access.
 */
export function injectSidecar(
  template: V1PodTemplateSpec,
  container: string,
  secretHash: string,
  settings: SidecarSettings,
  namedPorts: ReadonlySet<string> = new Set(),
): V1PodTemplateSpec {
  const copy = structuredClone(template);
  const spec = copy.spec!;
  const agentPort = settings.agentPort ?? 9440;
  const targetView = agentTargetView(spec, container);
  const { byName, redirected } = splitMappings(
    spec,
    container,
    namedPorts,
    settings.trafficPortBase,
    agentPort,
  );
  const mappings = [...byName, ...redirected].sort((a, b) => a.listenPort - b.listenPort);
  const probes = relayProbes(
    spec,
    container,
    new Set(mappings.map((m) => m.appPort)),
    freePortsAfter(spec, agentPort, mappings, settings.trafficPortBase ?? 15100),
  );
  const taken = new Set(byName.map((m) => m.name));
  for (const p of spec.containers.find((c) => c.name === container)?.ports ?? []) {
    if (p.name !== undefined && taken.has(p.name)) delete p.name;
  }
  const pullPolicy = settings.imagePullPolicy ? { imagePullPolicy: settings.imagePullPolicy } : {};
  const agent: V1Container = {
    name: AGENT_CONTAINER,
    image: settings.agentImage,
    ...pullPolicy,
    // The image's entrypoint is plain `node`: name it and the agent's main module explicitly.
    command: [...PRODUCT_IMAGE_COMMAND],
    args: [
      COMPONENT_MAIN.agent,
      `--listen=0.0.0.0:${agentPort}`,
      `--container=${container}`,
      `--secret-hash=${secretHash}`,
      ...mappings.map((m) => `--app-port=${m.appPort}:${m.listenPort}`),
      ...probes.relays.map((r) => `--probe-port=${r.appPort}:${r.listenPort}`),
      ...targetView.args,
      `--state-file=${AGENT_STATE_MOUNT}/subscriptions.json`,
      ...(settings.agentTlsSecret
        ? [`--tls-cert=${AGENT_TLS_MOUNT}/tls.crt`, `--tls-key=${AGENT_TLS_MOUNT}/tls.key`]
        : []),
    ],
    ...(targetView.envFrom.length > 0 ? { envFrom: targetView.envFrom } : {}),
    env: [
      ...targetView.env,
      { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
      { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
    ],
    ports: [
      { name: "sy-agent", containerPort: agentPort, protocol: "TCP" },
      ...byName.map((m) => ({ name: m.name, containerPort: m.listenPort, protocol: "TCP" })),
    ],
    volumeMounts: [
      { name: AGENT_STATE_VOLUME, mountPath: AGENT_STATE_MOUNT },
      ...(settings.agentTlsSecret
        ? [{ name: AGENT_TLS_VOLUME, mountPath: AGENT_TLS_MOUNT, readOnly: true }]
        : []),
      ...targetView.volumeMounts,
    ],
    securityContext: agentSecurityContext(),
    // A native sidecar (an init container that keeps running): the kubelet starts it before
    // the app, and stops it only after the app has exited, so a terminating pod that
    // kube-proxy still sends traffic to never refuses it for want of an agent. The pod must
    // not be Ready before the agent serves its ports: when the app's readiness probe passes
    // through the agent's relay (listened last, after every port) that already holds, and the
    // app starts beside the agent; otherwise a startup probe holds the app back until the
    // agent listens (the kubelet probes once a second: about 1.3 s per pod).
    restartPolicy: "Always",
    ...(probes.readinessRelayed
      ? {}
      : { startupProbe: { tcpSocket: { port: agentPort }, periodSeconds: 1, failureThreshold: 60 } }),
  };
  // After the redirect init container (appended below), which must finish first.
  spec.volumes = [
    ...(spec.volumes ?? []),
    { name: AGENT_STATE_VOLUME, emptyDir: { sizeLimit: "1Mi" } },
    ...(settings.agentTlsSecret
      ? [{ name: AGENT_TLS_VOLUME, secret: { secretName: settings.agentTlsSecret } }]
      : []),
  ];
  if (redirected.length > 0) {
    if (!settings.redirectImage)
      throw new OptionError(
        "redirectImage",
        "the redirect init container needs an image with sh and iptables (--redirect-image)",
      );
    const redirect: V1Container = {
      name: REDIRECT_CONTAINER,
      image: settings.redirectImage,
      ...pullPolicy,
      command: ["sh", "-c", redirectScript(redirected)],
      securityContext: {
        runAsUser: 0,
        runAsNonRoot: false,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ["ALL"], add: ["NET_ADMIN", "NET_RAW"] },
      },
    };
    spec.initContainers = [...(spec.initContainers ?? []), redirect];
  }
  spec.initContainers = [...(spec.initContainers ?? []), agent];
  copy.metadata = {
    ...copy.metadata,
    annotations: {
      ...(copy.metadata?.annotations ?? {}),
      [SECRET_HASH_ANNOTATION]: secretHash,
      ...(probes.annotation ? { [PROBE_PORTS_ANNOTATION]: probes.annotation } : {}),
    },
  };
  return copy;
}

/** Allocates ports no container of `spec` uses, after the agent's listen ports. */
function freePortsAfter(
  spec: V1PodSpec,
  agentPort: number,
  mappings: readonly PortMapping[],
  base: number,
): () => number {
  const used = new Set<number>([agentPort, ...mappings.map((m) => m.listenPort)]);
  for (const c of [...(spec.initContainers ?? []), ...spec.containers])
    for (const p of c.ports ?? []) used.add(p.containerPort);
  let next = Math.max(base, ...mappings.map((m) => m.listenPort + 1));
  return () => {
    while (used.has(next)) next++;
    used.add(next);
    return next++;
  };
}

/** A copy of `template` with everything injectSidecar added removed (used when the workload was edited meanwhile). */
export function stripSidecar(template: V1PodTemplateSpec): V1PodTemplateSpec {
  const copy = structuredClone(template);
  const spec = copy.spec!;
  restoreProbes(copy, agentArg(spec, "--container=")[0]);
  restorePortNames(spec);
  spec.containers = spec.containers.filter((c) => c.name !== AGENT_CONTAINER);
  if (spec.initContainers) {
    spec.initContainers = spec.initContainers.filter(
      (c) => c.name !== REDIRECT_CONTAINER && c.name !== AGENT_CONTAINER,
    );
    if (spec.initContainers.length === 0) delete spec.initContainers;
  }
  if (spec.volumes) {
    spec.volumes = spec.volumes.filter((v) => v.name !== AGENT_TLS_VOLUME && v.name !== AGENT_STATE_VOLUME);
    if (spec.volumes.length === 0) delete spec.volumes;
  }
  const ann = copy.metadata?.annotations;
  if (ann) {
    delete ann[SECRET_HASH_ANNOTATION];
    if (Object.keys(ann).length === 0) delete copy.metadata!.annotations;
  }
  return copy;
}

/** The values of the agent container's args that start with `prefix`. */
function agentArg(spec: V1PodSpec, prefix: string): string[] {
  return (agentContainer(spec)?.args ?? [])
    .filter((a) => a.startsWith(prefix))
    .map((a) => a.slice(prefix.length));
}

/** Gives the app's ports back the names the agent took (read from the agent's ports and args). */
function restorePortNames(spec: V1PodSpec): void {
  const agent = agentContainer(spec);
  if (!agent) return;
  const arg = (prefix: string) => agentArg(spec, prefix);
  const app = spec.containers.find((c) => c.name === arg("--container=")[0]);
  const appPortOf = new Map(
    arg("--app-port=").map((v) => {
      const [p, l] = v.split(":");
      return [Number(l), Number(p)] as const;
    }),
  );
  for (const taken of (agent.ports ?? []).filter((p) => p.name && p.name !== "sy-agent")) {
    const appPort = appPortOf.get(taken.containerPort);
    const port = app?.ports?.find((p) => p.containerPort === appPort && p.name === undefined);
    if (port) port.name = taken.name;
  }
}
