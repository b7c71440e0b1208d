// The sidecar provisioner under the chart's own identity: the control plane's RBAC rendered by
// `helm template` is applied to a real API server, a token of its ServiceAccount is minted,
// and the provisioner runs with nothing else. Proves the workload writes are PATCHes the
// chart allows (it grants no `update`), that the last release restores the template and the
// annotations byte for byte (fields the typed client does not know included), that a port a
// Service reaches by name is taken by name without privilege, and that a namespace whose
// PodSecurity level forbids the redirect init container's NET_ADMIN fails the child with the
// reason and the fix.
import {
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  Watch,
  type KubernetesObject,
  type V1Deployment,
  type V1StatefulSet,
} from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AGENT_CONTAINER,
  ORIGINAL_TEMPLATE_ANNOTATION,
  PATCHED_TEMPLATE_ANNOTATION,
  REDIRECT_CONTAINER,
  SidecarAgentProvisioner,
  type ResolvedTarget,
} from "../../../control-plane/src/member/index.js";
import { templateHash } from "../../../control-plane/src/member/sidecar-pod-template.js";
import { workloadPatch } from "../../../control-plane/src/member/sidecar-agent-provisioner.js";
import { readWorkloadJson } from "../../../control-plane/src/member/workload-json.js";
import { installCrds, TerminalReconcileError } from "../../../control-plane/src/runtime/index.js";
import { MemberController } from "../../../control-plane/src/member/index.js";
import { RouteSnapshotCache } from "../../../control-plane/src/route-discovery/index.js";
import { clusterSessionClient } from "../../../proto/api/v1alpha1/index.js";
import { startClusterSet, type ClusterSet, type TestCluster } from "../../env/index.js";
import { Helm } from "../../env/stack/helm.js";
import { eventually } from "../../support/poll.js";

const RELEASE_NS = "switchyard";
const CP_SA = "switchyard-control-plane";
const NS = "shop";
const HASH = "a".repeat(64);

let set: ClusterSet;
let east: TestCluster;
let admin: KubeConfig;
let asControlPlane: KubeConfig;

function bearerKubeConfig(cluster: TestCluster, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { name: cluster.name, server: cluster.server, caData: Buffer.from(cluster.caPem).toString("base64") },
    ],
    users: [{ name: "token", token }],
    contexts: [{ name: "ctx", cluster: cluster.name, user: "token" }],
    currentContext: "ctx",
  });
  return kc;
}

beforeAll(async () => {
  const helm = await Helm.create();
  try {
    set = await startClusterSet({ clusters: ["east"], controllerManager: false });
    east = set.get("east");
    admin = east.kubeConfig();
    const core = admin.makeApiClient(CoreV1Api);
    await installCrds(admin);
    for (const name of [RELEASE_NS, NS]) await core.createNamespace({ body: { metadata: { name } } });
    // The chart's control-plane identity, exactly as rendered (member side included: mode both).
    const manifests = await helm.template({}, RELEASE_NS);
    const rbac = manifests.filter(
      (m) =>
        ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"].includes(m.kind) &&
        m.metadata.name.startsWith(CP_SA),
    );
    expect(rbac.map((m) => m.kind).sort()).toContain("ClusterRole");
    const objects = KubernetesObjectApi.makeApiClient(admin);
    for (const m of rbac) await objects.create(m as unknown as KubernetesObject);
    const tr = await core.createNamespacedServiceAccountToken({
      name: CP_SA,
      namespace: RELEASE_NS,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    asControlPlane = bearerKubeConfig(east, tr.status!.token);
  } finally {
    helm.close();
  }
});

afterAll(async () => {
  await set?.stop();
});

const template = (app: string, ports: boolean) => ({
  metadata: { labels: { app }, annotations: { "example.test/note": "kept" } },
  spec: {
    automountServiceAccountToken: false,
    containers: [
      {
        name: "app",
        image: "example.test/app:1",
        ...(ports ? { ports: [{ name: "http", containerPort: 8080 }] } : {}),
        env: [{ name: "MODE", value: "demo" }],
      },
    ],
  },
});

function resolved(namespace: string, kind: "deployment" | "statefulset", name: string): ResolvedTarget {
  return {
    namespace,
    target: { kind, name },
    id: `${namespace}/${kind}/${name}`,
    workload: undefined,
    template: undefined,
    container: "app",
    pods: [],
    readyPods: [],
  } as unknown as ResolvedTarget;
}

describe("the sidecar provisioner with the chart's control-plane identity", () => {
  it("the chart denies update on workloads: the provisioner's writes must be patches", async () => {
    const apps = asControlPlane.makeApiClient(AppsV1Api);
    await admin.makeApiClient(AppsV1Api).createNamespacedDeployment({
      namespace: NS,
      body: {
        metadata: { name: "probe" },
        spec: { selector: { matchLabels: { app: "probe" } }, template: template("probe", true) },
      },
    });
    const d = await apps.readNamespacedDeployment({ namespace: NS, name: "probe" });
    await expect(
      apps.replaceNamespacedDeployment({ namespace: NS, name: "probe", body: d }),
    ).rejects.toMatchObject({ code: 403 });
  });

  for (const kind of ["deployment", "statefulset"] as const) {
    it(`injects into a ${kind} and restores template and annotations byte for byte`, async () => {
      const name = `web-${kind}`;
      const adminApps = admin.makeApiClient(AppsV1Api);
      const body = {
        metadata: { name, annotations: { "example.test/owner": "team-a" } },
        spec: { selector: { matchLabels: { app: name } }, template: template(name, true) },
      };
      const read = (): Promise<V1Deployment | V1StatefulSet> =>
        kind === "deployment"
          ? adminApps.readNamespacedDeployment({ namespace: NS, name })
          : adminApps.readNamespacedStatefulSet({ namespace: NS, name });
      if (kind === "deployment") await adminApps.createNamespacedDeployment({ namespace: NS, body });
      else
        await adminApps.createNamespacedStatefulSet({
          namespace: NS,
          body: { ...body, spec: { ...body.spec, serviceName: name } },
        });
      const before = await read();
      const logs: string[] = [];
      const provisioner = new SidecarAgentProvisioner({
        kubeConfig: asControlPlane,
        agentImage: "example.test/switchyard-agent:1",
        redirectImage: "example.test/switchyard-iptables:1",
        logger: pino({ level: "info" }, { write: (l: string) => void logs.push(l) }),
      });
      const signal = new AbortController().signal;
      const r = await provisioner.ensure({ resolved: resolved(NS, kind, name), secretHash: HASH, signal });
      expect(r.waiting?.reason).toBe("NoReadyPod"); // no kubelet here: the template is what counts
      const patched = await read();
      const spec = patched.spec!.template.spec!;
      expect(spec.containers.map((c) => c.name)).toEqual(["app"]);
      // The redirect first, then the agent as a native sidecar.
      expect(spec.initContainers?.map((c) => c.name)).toEqual([REDIRECT_CONTAINER, AGENT_CONTAINER]);
      expect(patched.metadata!.annotations!["example.test/owner"]).toBe("team-a");
      expect(JSON.parse(patched.metadata!.annotations![ORIGINAL_TEMPLATE_ANNOTATION]!)).toEqual(
        JSON.parse(JSON.stringify(before.spec!.template)),
      );
      // Idempotent: a second ensure with the same secret writes nothing.
      await provisioner.ensure({ resolved: resolved(NS, kind, name), secretHash: HASH, signal });
      expect((await read()).metadata!.resourceVersion).toBe(patched.metadata!.resourceVersion);
      // A new secret re-injects from the saved original (kept as it was).
      await provisioner.ensure({ resolved: resolved(NS, kind, name), secretHash: "b".repeat(64), signal });
      const rotated = await read();
      expect(rotated.metadata!.annotations![ORIGINAL_TEMPLATE_ANNOTATION]).toBe(
        patched.metadata!.annotations![ORIGINAL_TEMPLATE_ANNOTATION],
      );

      await provisioner.release({ namespace: NS, kind, name, id: `${NS}/${kind}/${name}` });
      const after = await read();
      expect(JSON.stringify(after.spec!.template)).toBe(JSON.stringify(before.spec!.template));
      // The API server's defaults in what we wrote are not a user's edit: the saved original is
      // put back as it is, with no warning.
      expect(logs.join("")).toContain("restored the original pod template");
      expect(logs.join("")).not.toContain("changed while the sidecar was in");
      expect(JSON.stringify(after.metadata!.annotations)).toBe(JSON.stringify(before.metadata!.annotations));
      // Safe to repeat.
      await provisioner.release({ namespace: NS, kind, name, id: `${NS}/${kind}/${name}` });
      expect((await read()).metadata!.resourceVersion).toBe(after.metadata!.resourceVersion);
    });
  }

  it("tells its own template from a user's edit while the workload's controller writes status after each change", async () => {
    // A Deployment controller answers every new generation with a burst of status writes (a
    // rollout's progress): none of it is an edit, and recording the stored template's hash
    // right after our write must not lose to it. An edit of the template is kept on release.
    const name = "busy-status";
    const adminApps = admin.makeApiClient(AppsV1Api);
    await adminApps.createNamespacedDeployment({
      namespace: NS,
      body: {
        metadata: { name },
        spec: { selector: { matchLabels: { app: name } }, template: template(name, true) },
      },
    });
    let statusWrites = 0;
    let seenGeneration = 1;
    let bursts = Promise.resolve();
    const json = setHeaderOptions("Content-Type", PatchStrategy.JsonPatch);
    const burst = async (generation: number) => {
      for (let i = 0; i < 12; i++) {
        await adminApps.patchNamespacedDeploymentStatus(
          {
            namespace: NS,
            name,
            body: [{ op: "replace", path: "/status/observedGeneration", value: generation }],
          },
          json,
        );
        statusWrites++;
      }
    };
    const watching = await new Watch(admin).watch(
      `/apis/apps/v1/namespaces/${NS}/deployments`,
      { fieldSelector: `metadata.name=${name}` },
      (_type, obj: V1Deployment) => {
        const generation = obj.metadata?.generation ?? 0;
        if (generation <= seenGeneration) return;
        seenGeneration = generation;
        bursts = bursts.then(() => burst(generation));
      },
      () => undefined,
    );
    const logs: string[] = [];
    const provisioner = new SidecarAgentProvisioner({
      kubeConfig: asControlPlane,
      agentImage: "example.test/switchyard-agent:1",
      redirectImage: "example.test/switchyard-iptables:1",
      logger: pino({ level: "info" }, { write: (l: string) => void logs.push(l) }),
    });
    const signal = new AbortController().signal;
    // The template write itself is preconditioned on what it read: a status write in between
    // answers 409, and the reconciler reads again and retries, as here.
    const ensure = async (secretHash: string) => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await provisioner.ensure({ resolved: resolved(NS, "deployment", name), secretHash, signal });
        } catch (err) {
          if ((err as { code?: number }).code !== 409 || attempt >= 200) throw err;
        }
      }
    };
    try {
      for (const hash of "01234".split("").map((c) => c.repeat(64))) {
        await ensure(hash);
        const d = await adminApps.readNamespacedDeployment({ namespace: NS, name });
        const stored = d.metadata!.annotations![PATCHED_TEMPLATE_ANNOTATION];
        expect(stored, "the stored template's hash recorded despite the status writes").toBe(
          templateHash(d.spec!.template),
        );
      }
    } finally {
      watching.abort();
      await bursts;
    }
    expect(statusWrites).toBeGreaterThanOrEqual(12 * 5);
    await provisioner.release({ namespace: NS, kind: "deployment", name, id: `${NS}/deployment/${name}` });
    expect(logs.join("")).not.toContain("changed while the sidecar was in");

    // Now a user's edit while the sidecar is in: kept, and said.
    await provisioner.ensure({ resolved: resolved(NS, "deployment", name), secretHash: HASH, signal });
    await adminApps.patchNamespacedDeployment(
      {
        namespace: NS,
        name,
        body: [{ op: "add", path: "/spec/template/metadata/labels/edited", value: "by-user" }],
      },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
    );
    await provisioner.release({ namespace: NS, kind: "deployment", name, id: `${NS}/deployment/${name}` });
    expect(logs.join("")).toContain("changed while the sidecar was in");
    const after = await adminApps.readNamespacedDeployment({ namespace: NS, name });
    expect(after.spec!.template.metadata!.labels!.edited).toBe("by-user");
    expect(after.spec!.template.spec!.initContainers ?? []).toEqual([]);
  });

  it("keeps template fields the typed client does not know (pod-level resources) through inject and restore", async () => {
    const name = "newer-fields";
    const objects = KubernetesObjectApi.makeApiClient(admin);
    const t = template(name, true) as Record<string, unknown> & { spec: Record<string, unknown> };
    // Pod-level resources (PodLevelResources, on by default since 1.34) are not in the client's model.
    t.spec.resources = { limits: { cpu: "1", memory: "256Mi" } };
    await objects.create({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name, namespace: NS },
      spec: { selector: { matchLabels: { app: name } }, template: t },
    } as KubernetesObject);
    type Raw = { spec: { template: { spec: Record<string, unknown> } }; metadata: Record<string, unknown> };
    const raw = async () => (await readWorkloadJson<Raw>(admin, "deployment", NS, name))!;
    const before = await raw();
    expect(before.spec.template.spec.resources).toEqual({ limits: { cpu: "1", memory: "256Mi" } });
    const provisioner = new SidecarAgentProvisioner({
      kubeConfig: asControlPlane,
      agentImage: "example.test/switchyard-agent:1",
      redirectImage: "example.test/switchyard-iptables:1",
    });
    const signal = new AbortController().signal;
    await provisioner.ensure({ resolved: resolved(NS, "deployment", name), secretHash: HASH, signal });
    expect((await raw()).spec.template.spec.resources).toEqual(before.spec.template.spec.resources);
    await provisioner.release({ namespace: NS, kind: "deployment", name, id: `${NS}/deployment/${name}` });
    const after = await raw();
    expect(JSON.stringify(after.spec.template)).toBe(JSON.stringify(before.spec.template));
    expect(JSON.stringify(after.metadata.annotations)).toBe(JSON.stringify(before.metadata.annotations));
  });

  it("a concurrent edit between read and write is a conflict, not a lost update", async () => {
    // The patch carries the resourceVersion read: the API server answers 409.
    const apps = asControlPlane.makeApiClient(AppsV1Api);
    const adminApps = admin.makeApiClient(AppsV1Api);
    const d = await adminApps.readNamespacedDeployment({ namespace: NS, name: "probe" });
    const json = setHeaderOptions("Content-Type", PatchStrategy.JsonPatch);
    await adminApps.patchNamespacedDeployment(
      { namespace: NS, name: "probe", body: [{ op: "replace", path: "/spec/replicas", value: 3 }] },
      json,
    );
    const ops = workloadPatch(d, d.spec!.template, {});
    await expect(
      apps.patchNamespacedDeployment({ namespace: NS, name: "probe", body: ops }, json),
    ).rejects.toMatchObject({ code: 409 });
  });

  it("under PodSecurity restricted, a port a Service reaches by name is taken by name: no init container", async () => {
    const ns = "psa-named";
    await admin.makeApiClient(CoreV1Api).createNamespace({
      body: { metadata: { name: ns, labels: { "pod-security.kubernetes.io/enforce": "restricted" } } },
    });
    await admin.makeApiClient(CoreV1Api).createNamespacedService({
      namespace: ns,
      body: {
        metadata: { name: "web" },
        spec: { selector: { app: "web" }, ports: [{ port: 80, targetPort: "http" as never }] },
      },
    });
    const adminApps = admin.makeApiClient(AppsV1Api);
    await adminApps.createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: "web" },
        spec: { selector: { matchLabels: { app: "web" } }, template: template("web", true) },
      },
    });
    const before = await adminApps.readNamespacedDeployment({ namespace: ns, name: "web" });
    const provisioner = new SidecarAgentProvisioner({
      kubeConfig: asControlPlane,
      agentImage: "example.test/switchyard-agent:1",
    });
    await provisioner.ensure({
      resolved: resolved(ns, "deployment", "web"),
      secretHash: HASH,
      signal: new AbortController().signal,
    });
    const patched = await adminApps.readNamespacedDeployment({ namespace: ns, name: "web" });
    const spec = patched.spec!.template.spec!;
    expect(spec.initContainers?.map((c) => c.name)).toEqual([AGENT_CONTAINER]); // no redirect
    const agent = spec.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    expect(agent.ports!.map((p) => p.name)).toEqual(["sy-agent", "http"]);
    expect(spec.containers[0]!.ports!.map((p) => p.name)).toEqual([undefined]);
    await provisioner.release({ namespace: ns, kind: "deployment", name: "web", id: `${ns}/deployment/web` });
    const after = await adminApps.readNamespacedDeployment({ namespace: ns, name: "web" });
    expect(JSON.stringify(after.spec!.template)).toBe(JSON.stringify(before.spec!.template));
  });

  for (const level of ["baseline", "restricted"]) {
    it(`PodSecurity "${level}" forbids the redirect: a terminal error naming the reason and the fix`, async () => {
      const ns = `psa-${level}`;
      await admin.makeApiClient(CoreV1Api).createNamespace({
        body: { metadata: { name: ns, labels: { "pod-security.kubernetes.io/enforce": level } } },
      });
      await admin.makeApiClient(AppsV1Api).createNamespacedDeployment({
        namespace: ns,
        body: {
          metadata: { name: "web" },
          spec: { selector: { matchLabels: { app: "web" } }, template: template("web", true) },
        },
      });
      const provisioner = new SidecarAgentProvisioner({
        kubeConfig: asControlPlane,
        agentImage: "example.test/switchyard-agent:1",
        redirectImage: "example.test/switchyard-iptables:1",
      });
      const err = await provisioner
        .ensure({
          resolved: resolved(ns, "deployment", "web"),
          secretHash: HASH,
          signal: new AbortController().signal,
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(TerminalReconcileError);
      expect(err).toMatchObject({ reason: "PodSecurityForbidsRedirect" });
      const message = (err as Error).message;
      expect(message).toContain(level);
      expect(message).toContain("NET_ADMIN");
      expect(message).toContain("pod-security.kubernetes.io/enforce=privileged");
      // Nothing was written.
      const d = await admin.makeApiClient(AppsV1Api).readNamespacedDeployment({ namespace: ns, name: "web" });
      expect(d.spec!.template.spec!.containers.map((c) => c.name)).toEqual(["app"]);
      // A container without ports needs no redirect, so the same namespace accepts the sidecar.
      await admin.makeApiClient(AppsV1Api).createNamespacedDeployment({
        namespace: ns,
        body: {
          metadata: { name: "worker" },
          spec: { selector: { matchLabels: { app: "worker" } }, template: template("worker", false) },
        },
      });
      await provisioner.ensure({
        resolved: resolved(ns, "deployment", "worker"),
        secretHash: HASH,
        signal: new AbortController().signal,
      });
      await eventually("the sidecar in worker", async () => {
        const w = await admin
          .makeApiClient(AppsV1Api)
          .readNamespacedDeployment({ namespace: ns, name: "worker" });
        return w.spec!.template.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER);
      });
    });
  }

  it("the member fails the child with PodSecurityForbidsRedirect as its Ready condition", async () => {
    const ns = "psa-child";
    await admin.makeApiClient(CoreV1Api).createNamespace({
      body: { metadata: { name: ns, labels: { "pod-security.kubernetes.io/enforce": "baseline" } } },
    });
    await admin.makeApiClient(AppsV1Api).createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: "web" },
        spec: { selector: { matchLabels: { app: "web" } }, template: template("web", true) },
      },
    });
    const member = new MemberController({
      kubeConfig: asControlPlane,
      routerEndpoint: "ws://routers.example.test:8443",
      provisioner: new SidecarAgentProvisioner({
        kubeConfig: asControlPlane,
        agentImage: "example.test/switchyard-agent:1",
        redirectImage: "example.test/switchyard-iptables:1",
      }),
      routes: new RouteSnapshotCache(),
      secretNamespace: RELEASE_NS,
      waitingRecheckMs: 500,
    });
    const ac = new AbortController();
    const running = member.start(ac.signal);
    try {
      const sessions = clusterSessionClient(admin);
      await sessions.create({
        metadata: { name: "web-session", namespace: ns },
        spec: { clientKeyHash: HASH, target: "deployment/web" },
      });
      const failed = await eventually("the child Failed", async () => {
        const s = await sessions.get({ namespace: ns, name: "web-session" });
        return s?.status?.phase === "Failed" && s;
      });
      const ready = failed.status!.conditions!.find((c) => c.type === "Ready")!;
      expect(ready).toMatchObject({ status: "False", reason: "PodSecurityForbidsRedirect" });
      expect(ready.message).toContain("baseline");
      expect(ready.message).toContain("targetPort");
    } finally {
      ac.abort();
      await running;
    }
  });
});
