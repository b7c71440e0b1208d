// Tenancy on a member, against a real kube-apiserver (with kube-controller-manager: real
// Deployments → Pods, the test plays the kubelet), real process agents and the real router
// process fed by the real RouteDiscovery server over mutual TLS:
// - two sessions with the same name in two namespaces are two routes: neither replaces nor
//   removes the other, and a client with one's secret reaches only its own agents (each
//   target's env says which tenant answered) — never the other's, whichever name it asks for;
// - the member enforces the allow-list itself on sessions created directly on it (single
//   sessions and children alike): a namespace, kind or target it does not allow is refused
//   with Valid/Ready=False naming the field and the fix, and nothing is provisioned or routed.
import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  clusterSessionClient,
  LABELS,
  type ClusterSession,
  type ClusterSessionSpec,
} from "../../../proto/api/v1alpha1/index.js";
import * as pb from "../../../proto/gen/session_pb.js";
import { sessionKey } from "../../../proto/session-endpoint.js";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  type RouteSnapshotCache,
  RouterAuthenticator,
} from "../../../control-plane/src/route-discovery/index.js";
import {
  agentSecretName,
  MEMBER_FINALIZER,
  ProcessAgentProvisioner,
} from "../../../control-plane/src/member/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { createCertificateAuthority, runPods, startClusterSet, type ClusterSet } from "../../env/index.js";
import { RawSessionClient, UpgradeRefusedError } from "../../peers/raw-session-client.js";
import { eventually } from "../../support/poll.js";
import { RouterProcess } from "../router/router-process.js";
import { removeTempDirs, startMember, tempDir } from "./member-harness.js";

const TENANTS = ["tenant-a", "tenant-b", "tenant-c"] as const;
const ALLOW_LIST = {
  namespaces: ["tenant-a", "tenant-b"],
  targetKinds: ["deployment" as const],
  targets: ["tenant-a/deployment/web", "tenant-b/deployment/web", "tenant-b/deployment/api-*"],
};
const SHARED = "mc-0123456789abcdef-east";
const secrets = { "tenant-a": "secret-of-tenant-a", "tenant-b": "secret-of-tenant-b" };
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

let set: ClusterSet;
let kc: KubeConfig;
let kubeconfigPath: string;
let core: CoreV1Api;
let provisioner: ProcessAgentProvisioner;
let member: ReturnType<typeof startMember>;
let server: RouteDiscoveryServer;
let router: RouterProcess;
const sessions = () => clusterSessionClient(kc);
const get = (namespace: string, name: string) => sessions().get({ namespace, name });
const condition = (s: ClusterSession | undefined, type: string) =>
  s?.status?.conditions?.find((c) => c.type === type);

async function createDeployment(namespace: string, name: string, tenant: string): Promise<void> {
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace,
    body: {
      metadata: { name },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: {
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            containers: [
              {
                name: "app",
                image: "example.test/app:1",
                ports: [{ containerPort: 8080 }],
                env: [{ name: "TENANT", value: tenant }],
              },
            ],
          },
        },
      },
    },
  });
  await runPods(kc, namespace, `app=${name}`, 1);
}

function createSession(
  namespace: string,
  name: string,
  spec: Partial<ClusterSessionSpec> & { target: string },
  secret = "some-secret",
  labels: Record<string, string> = {},
) {
  return sessions().create({
    metadata: { name, namespace, labels },
    spec: { clientKeyHash: sha256(secret), ...spec },
  });
}

/** RouteDiscovery over mutual TLS in front of `cache`, and the real router process fed by it. */
async function startRouter(cache: RouteSnapshotCache): Promise<void> {
  const ca = await createCertificateAuthority("member-tenancy");
  const serverCert = await ca.issue({
    commonName: "control-plane",
    usage: "server",
    ipAddresses: ["127.0.0.1"],
  });
  const routerCert = await ca.issue({ commonName: "router-east", usage: "client" });
  const dir = tempDir("sy-tenancy-router-");
  for (const [file, pem] of Object.entries({
    "ca.crt": ca.certPem,
    "tls.crt": routerCert.certPem,
    "tls.key": routerCert.keyPem,
  }))
    writeFileSync(join(dir, file), pem, { mode: 0o600 });
  server = new RouteDiscoveryServer({
    streams: new RouteDiscoveryStreamServer({
      cache,
      authenticator: new RouterAuthenticator({ clientCertificate: { allowedCommonNames: ["router-east"] } }),
    }),
    host: "127.0.0.1",
    port: 0,
    tls: { certPem: serverCert.certPem, keyPem: serverCert.keyPem, clientCaPem: ca.certPem },
  });
  const { url } = await server.listen();
  router = await RouterProcess.start(null, [
    "--control-plane",
    url,
    "--control-plane-ca",
    join(dir, "ca.crt"),
    "--client-cert",
    join(dir, "tls.crt"),
    "--client-key",
    join(dir, "tls.key"),
    "--router-id",
    "router-east",
  ]);
}

/** The TENANT variable of the target that answers an env request through the router. */
async function tenantBehind(client: RawSessionClient): Promise<string | undefined> {
  const reply = await client.request(
    { family: pb.FrameFamily.ENV, kind: pb.EnvKind.GET },
    pb.EnvGetSchema,
    {},
  );
  return reply.as(pb.EnvResultSchema).vars.TENANT;
}

/** The HTTP status an upgrade to `url` with `secret` is refused with (fails the test when accepted). */
async function refusal(url: string, secret: string): Promise<number> {
  const err: unknown = await RawSessionClient.connect(url, secret, { hello: false }).then(
    (c) => (c.close(), undefined),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UpgradeRefusedError);
  return (err as UpgradeRefusedError).status;
}

/** Refused by the router as no session of this id and secret (it says the same for both). */
const NO_SUCH_SESSION = [401, 404];

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["east"], controllerManager: true });
  const east = set.get("east");
  kc = east.kubeConfig();
  kubeconfigPath = east.adminKubeconfigPath;
  core = kc.makeApiClient(CoreV1Api);
  await installCrds(kc);
  for (const ns of TENANTS) {
    await core.createNamespace({ body: { metadata: { name: ns } } });
    await eventually(`the default ServiceAccount of ${ns}`, () =>
      core.readNamespacedServiceAccount({ namespace: ns, name: "default" }).then(() => true),
    );
    await createDeployment(ns, "web", ns);
  }
  provisioner = new ProcessAgentProvisioner({ kubeconfigPath, stateDir: tempDir("sy-tenancy-agents-") });
  member = startMember(kc, provisioner, { allowList: ALLOW_LIST });
  await startRouter(member.routes);
}, 180_000);

afterAll(async () => {
  await member?.stop();
  await router?.stop();
  await server?.close();
  await provisioner?.stopAll();
  await set?.stop();
  removeTempDirs();
}, 60_000);

describe("same-named sessions in two namespaces on a member", () => {
  it("are two routes: neither replaces, removes nor reaches the other's agents", async () => {
    await createSession("tenant-a", SHARED, { target: "deployment/web" }, secrets["tenant-a"]);
    const keyA = sessionKey("tenant-a", SHARED);
    const keyB = sessionKey("tenant-b", SHARED);
    const readyA = await eventually("tenant-a's session Ready", async () => {
      const s = await get("tenant-a", SHARED);
      return s?.status?.phase === "Ready" && s;
    });
    expect(readyA.status!.gateway).toMatch(new RegExp(`/v1/sessions/${keyA}$`));
    const routeA = await eventually("tenant-a's route", () => member.routes.get(keyA));
    await eventually("the router ready", async () => (await fetch(`${router.base}/readyz`)).status === 200);
    const a = await eventually("tenant-a's client attached", () =>
      RawSessionClient.connect(router.sessionUrl(keyA), secrets["tenant-a"]),
    );
    expect(await tenantBehind(a)).toBe("tenant-a");

    // The same name in tenant-b: a route of its own, tenant-a's untouched.
    await createSession("tenant-b", SHARED, { target: "deployment/web" }, secrets["tenant-b"]);
    const readyB = await eventually("tenant-b's session Ready", async () => {
      const s = await get("tenant-b", SHARED);
      return s?.status?.phase === "Ready" && s;
    });
    expect(readyB.status!.gateway).toMatch(new RegExp(`/v1/sessions/${keyB}$`));
    const routeB = await eventually("tenant-b's route", () => member.routes.get(keyB));
    expect(member.routes.get(keyA)).toEqual(routeA);
    expect(routeB.clientKeyHash).toBe(sha256(secrets["tenant-b"]));
    expect(routeB.upstreams.map((u) => u.url)).not.toEqual(routeA.upstreams.map((u) => u.url));
    expect(routeB.upstreams[0]!.secret).not.toBe(routeA.upstreams[0]!.secret);
    const b = await eventually("tenant-b's client attached", () =>
      RawSessionClient.connect(router.sessionUrl(keyB), secrets["tenant-b"]),
    );
    expect(await tenantBehind(b)).toBe("tenant-b");
    expect(await tenantBehind(a)).toBe("tenant-a");

    // Attach: each tenant's secret opens its own session only; the bare name is no session.
    expect(NO_SUCH_SESSION).toContain(await refusal(router.sessionUrl(keyA), secrets["tenant-b"]));
    expect(NO_SUCH_SESSION).toContain(await refusal(router.sessionUrl(keyB), secrets["tenant-a"]));
    expect(NO_SUCH_SESSION).toContain(await refusal(router.sessionUrl(SHARED), secrets["tenant-a"]));
    expect(NO_SUCH_SESSION).toContain(await refusal(router.sessionUrl(SHARED), secrets["tenant-b"]));
    // Nor one hop further: tenant-b's agent secret opens no session on tenant-a's agent.
    expect(await refusal(routeA.upstreams[0]!.url, routeB.upstreams[0]!.secret)).toBe(401);

    // tenant-b's session ends: its route goes, tenant-a's stays and keeps serving its client.
    await sessions().delete({ namespace: "tenant-b", name: SHARED });
    await eventually("tenant-b's session gone", async () => (await get("tenant-b", SHARED)) === undefined);
    expect(member.routes.get(keyB)).toBeUndefined();
    expect(member.routes.get(keyA)).toEqual(routeA);
    expect(b.closed ?? (await b.waitClosed(10_000))).toMatchObject({ code: 4404 });
    expect(a.closed).toBeUndefined();
    expect(await tenantBehind(a)).toBe("tenant-a");

    // A live client renews only the session it is attached to.
    await member.member.observeLiveSessions([keyB, SHARED]);
    expect((await get("tenant-a", SHARED))!.status?.renewedAt).toBeUndefined();
    await member.member.observeLiveSessions([keyA]);
    expect((await get("tenant-a", SHARED))!.status?.renewedAt).toBeDefined();
    a.close();
    await sessions().delete({ namespace: "tenant-a", name: SHARED });
    await eventually("tenant-a's session gone", async () => (await get("tenant-a", SHARED)) === undefined);
  });
});

describe("the member's own allow-list", () => {
  it.each([
    {
      what: "a namespace",
      namespace: "tenant-c",
      target: "deployment/web",
      reason: "NamespaceNotAllowed",
      message:
        /^metadata\.namespace: namespace tenant-c is not in the operator's session allow-list \(tenant-a, tenant-b\).*--allowed-namespaces/,
    },
    {
      what: "a kind",
      namespace: "tenant-a",
      target: "pod/web-0",
      reason: "TargetKindNotAllowed",
      message: /^spec\.target: target kind pod is not allowed.*--allowed-target-kinds/,
    },
    {
      what: "a target",
      namespace: "tenant-b",
      target: "deployment/worker",
      reason: "TargetNotAllowed",
      message: /^spec\.target: target tenant-b\/deployment\/worker matches none of .*--allowed-targets/,
    },
  ])(
    "refuses $what it does not allow, for a session created on it directly and for a child",
    async ({ namespace, target, reason, message }) => {
      const parent = `mc-${randomBytes(8).toString("hex")}`;
      const child = `${parent}-east`;
      const single = `cs-${randomBytes(8).toString("hex")}`;
      await createSession(namespace, single, { target });
      await createSession(
        namespace,
        child,
        { target, parent: { name: parent, cluster: "east", primaryClusterId: "primary" } },
        "child-secret",
        { [LABELS.parent]: parent, [LABELS.primary]: "primary", [LABELS.cluster]: "east" },
      );
      // Counted by reason while they exist (the gauge reads the member's cache at scrape).
      await eventually(`two ${reason} refusals counted`, async () =>
        (await member.member.metrics.registry.metrics()).includes(
          `switchyard_cluster_sessions_invalid{reason="${reason}"} 2`,
        ),
      );
      for (const name of [single, child]) {
        const refused = await eventually(`${name} refused`, async () => {
          const s = await get(namespace, name);
          return s?.status?.phase === "Failed" && s;
        });
        for (const type of ["Valid", "Ready"]) {
          expect(condition(refused, type)).toMatchObject({ status: "False", reason });
          expect(condition(refused, type)!.message).toMatch(message);
        }
        expect(refused.metadata.finalizers ?? []).not.toContain(MEMBER_FINALIZER);
        expect(refused.status).toMatchObject({ agents: 0 });
        expect(refused.status!.gateway).toBeUndefined();
        expect(member.routes.get(sessionKey(namespace, name))).toBeUndefined();
        await sessions().delete({ namespace, name });
        await eventually(`${name} gone`, async () => (await get(namespace, name)) === undefined);
      }
      await eventually("refusals no longer counted once deleted", async () =>
        (await member.member.metrics.registry.metrics()).includes(
          `switchyard_cluster_sessions_invalid{reason="${reason}"} 0`,
        ),
      );
      // Nothing was provisioned for the refused target: no agent, no agent Secret.
      expect(provisioner.records()).toEqual([]);
      await expect(
        core.readNamespacedSecret({ namespace, name: agentSecretName(`${namespace}/${target}`) }),
      ).rejects.toMatchObject({ code: 404 });
    },
  );

  it("serves a target it allows by pattern", async () => {
    await createDeployment("tenant-b", "api-v2", "tenant-b");
    await createSession("tenant-b", "cs-allowed", { target: "deployment/api-v2" });
    const ready = await eventually("the allowed session Ready", async () => {
      const s = await get("tenant-b", "cs-allowed");
      return s?.status?.phase === "Ready" && s;
    });
    expect(condition(ready, "Valid")).toMatchObject({ status: "True", reason: "Allowed" });
    expect(ready.metadata.finalizers).toContain(MEMBER_FINALIZER);
    await sessions().delete({ namespace: "tenant-b", name: "cs-allowed" });
    await eventually(
      "the allowed session gone",
      async () => (await get("tenant-b", "cs-allowed")) === undefined,
    );
  });
});
