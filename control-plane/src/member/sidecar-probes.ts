// The target container's kubelet probes, kept away from sessions. The kubelet probes the pod IP
// from the node, so a probe on a port the agent takes over (iptables-redirected, or a port name
// the agent took) would reach the agent — and under a steal, the developer's local process,
// whose answer to /healthz then decides whether the deployed pods are Ready or restarted. (A
// probe by name would not even resolve once the app's port lost its name.) Each such probe is
// pointed at a relay port of the agent that always forwards to the app (`--probe-port`), as a
// mesh sidecar rewrites probes; the original port is kept in an annotation so stripSidecar can
// put it back.
import type { V1Container, V1PodSpec, V1PodTemplateSpec } from "@kubernetes/client-node";
import { GROUP } from "../../../proto/api/v1alpha1/index.js";

/** On the pod template: JSON object relay port → the probe's original port (number or name). */
export const PROBE_PORTS_ANNOTATION = `${GROUP}/probe-ports`;

const PROBES = ["livenessProbe", "readinessProbe", "startupProbe"] as const;

export interface ProbeRelay {
  /** The app's port the probes targeted. */
  appPort: number;
  /** The agent's relay port the probes now target. */
  listenPort: number;
}

type ProbeKind = (typeof PROBES)[number];

/** A probe's port holder (httpGet, tcpSocket or grpc), skipping probes aimed at another host. */
function probePort(c: V1Container, kind: ProbeKind): { port: number | string } | undefined {
  const probe = c[kind];
  if (probe?.httpGet && !probe.httpGet.host) return probe.httpGet as { port: number | string };
  if (probe?.tcpSocket && !probe.tcpSocket.host) return probe.tcpSocket as { port: number | string };
  return probe?.grpc;
}

/**
 * Points the probes of `container` (in `spec`, edited in place; call before the app's port names
 * change) that target one of `takenPorts` at relay ports allocated from `nextFree`. Returns the
 * relays for the agent, the annotation value: probe kind → original port (undefined when no
 * probe was moved), and whether the readiness probe now passes through the agent.
 */
export function relayProbes(
  spec: V1PodSpec,
  container: string,
  takenPorts: ReadonlySet<number>,
  nextFree: () => number,
): { relays: ProbeRelay[]; annotation: string | undefined; readinessRelayed: boolean } {
  const target = spec.containers.find((c) => c.name === container);
  if (!target) return { relays: [], annotation: undefined, readinessRelayed: false };
  const byName = new Map(
    (target.ports ?? []).filter((p) => p.name).map((p) => [p.name!, p.containerPort] as const),
  );
  const relayOf = new Map<number, number>();
  const originals: Partial<Record<ProbeKind, number | string>> = {};
  for (const kind of PROBES) {
    const holder = probePort(target, kind);
    if (!holder) continue;
    const original = holder.port;
    const appPort = typeof original === "number" ? original : (byName.get(original) ?? Number(original));
    if (!takenPorts.has(appPort)) continue;
    let listenPort = relayOf.get(appPort);
    if (listenPort === undefined) {
      listenPort = nextFree();
      relayOf.set(appPort, listenPort);
    }
    originals[kind] = original;
    holder.port = listenPort;
  }
  const relays = [...relayOf].map(([appPort, listenPort]) => ({ appPort, listenPort }));
  return {
    relays,
    annotation: relays.length > 0 ? JSON.stringify(originals) : undefined,
    readinessRelayed: originals.readinessProbe !== undefined,
  };
}

/** Undoes relayProbes on `template` (edited in place) from its annotation, and drops the annotation. */
export function restoreProbes(template: V1PodTemplateSpec, container: string | undefined): void {
  const annotations = template.metadata?.annotations;
  const raw = annotations?.[PROBE_PORTS_ANNOTATION];
  if (raw === undefined) return;
  delete annotations![PROBE_PORTS_ANNOTATION];
  let originals: Partial<Record<ProbeKind, number | string>>;
  try {
    originals = JSON.parse(raw) as typeof originals;
  } catch {
    return; // not ours to interpret: leave the probes as they are
  }
  const target = template.spec?.containers.find((c) => c.name === container);
  if (!target) return;
  for (const kind of PROBES) {
    const holder = probePort(target, kind);
    const original = originals[kind];
    if (holder && (typeof original === "number" || typeof original === "string")) holder.port = original;
  }
}
