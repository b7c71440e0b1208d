// What the CLI suites run against: one real API server (test/env, no controller manager)
// with the Switchyard CRDs, the namespace, a developer "alice" (group `dev`) holding a
// namespaced Role with the suite's rules, read access to the SwitchyardOperator, and the
// pieces simulated-primary.ts routes sessions through — a real router process and scripted
// agents east (the Default) and west. The SwitchyardOperator object exists without status:
// each suite writes the status it tests. Also the CLI run in process as a user would.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  CoreV1Api,
  RbacAuthorizationV1Api,
  type KubeConfig,
  type V1PolicyRule,
} from "@kubernetes/client-node";
import { OPERATOR_OBJECT_NAME, switchyardOperatorClient } from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { run } from "../../../cli/src/main.js";
import { ScriptedAgent } from "../../peers/scripted-agent.js";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { testScratchDir } from "../../support/scratch-dir.js";
import { RouterProcess } from "../router/router-process.js";

/** What a developer does with their own sessions (and branches). */
export const DEVELOPER_VERBS = ["create", "get", "list", "watch", "delete"];

/** A Role rule over switchyard.dev `resources`, by default with DEVELOPER_VERBS. */
export const switchyardRule = (resources: string[], verbs = DEVELOPER_VERBS): V1PolicyRule => ({
  apiGroups: ["switchyard.dev"],
  resources,
  verbs,
});

export interface DeveloperClusterOptions {
  namespace: string;
  /** The developer's Role in `namespace`. */
  rules: V1PolicyRule[];
  /** The group allowed to read the SwitchyardOperator; default `dev`, alice's group. */
  operatorReaders?: string;
  /** east's environment, as the Default cluster's agent reports it. */
  eastEnv: Record<string, string>;
}

export interface DeveloperCluster {
  set: ClusterSet;
  admin: KubeConfig;
  /** alice's kubeconfig path (client certificate, group `dev`). */
  alice: string;
  router: RouterProcess;
  east: ScriptedAgent;
  west: ScriptedAgent;
  /** Stops the router, the agents and the cluster set; every process and file goes. */
  stop(): Promise<void>;
}

const RBAC_GROUP = "rbac.authorization.k8s.io";

export async function startDeveloperCluster(o: DeveloperClusterOptions): Promise<DeveloperCluster> {
  const set = await startClusterSet({ clusters: ["primary"], controllerManager: false });
  let router: RouterProcess | undefined;
  const east = new ScriptedAgent({ name: "east", secret: "agent-east", env: o.eastEnv });
  const west = new ScriptedAgent({ name: "west", secret: "agent-west" });
  const stop = async () => {
    await router?.stop();
    await east.stop();
    await west.stop();
    await set.stop();
  };
  try {
    const c = set.get("primary");
    const admin = c.kubeConfig();
    await installCrds(admin);
    await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: o.namespace } } });
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    const group = (name: string) => [{ apiGroup: RBAC_GROUP, kind: "Group", name }];
    await rbac.createClusterRole({
      body: {
        metadata: { name: "switchyard-read-operator" },
        rules: [switchyardRule(["switchyardoperators"], ["get", "list"])],
      },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: "switchyard-read-operator" },
        roleRef: { apiGroup: RBAC_GROUP, kind: "ClusterRole", name: "switchyard-read-operator" },
        subjects: group(o.operatorReaders ?? "dev"),
      },
    });
    await rbac.createNamespacedRole({
      namespace: o.namespace,
      body: { metadata: { name: "switchyard-dev" }, rules: o.rules },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: o.namespace,
      body: {
        metadata: { name: "switchyard-dev" },
        roleRef: { apiGroup: RBAC_GROUP, kind: "Role", name: "switchyard-dev" },
        subjects: group("dev"),
      },
    });
    const alice = (await c.mintUser("alice", ["dev"])).kubeconfigPath;

    await east.start();
    await west.start();
    router = await RouterProcess.start([]);
    await switchyardOperatorClient(admin).create({
      metadata: { name: OPERATOR_OBJECT_NAME },
      spec: { clusterName: "primary", multiCluster: true },
    });
    return { set, admin, alice, router, east, west, stop };
  } catch (e) {
    await stop().catch(() => {});
    throw e;
  }
}

/** Runs the CLI in process with `args`; `o` fills while it runs, `exited` is its exit code. */
export function startCli(args: string[]) {
  const o = { out: "", err: "" };
  const exited = run(args, {
    stdout: (t) => void (o.out += t),
    stderr: (t) => void (o.err += t),
  });
  return { o, exited };
}

/** Runs the CLI in process with `args` to its end. */
export async function runCli(args: string[]) {
  const { o, exited } = startCli(args);
  const code = await exited;
  return { code, ...o };
}

/** A switchyard.json for `target` in a scratch directory (removed with the test). */
export function configFile(prefix: string, target: string, cfg: Record<string, unknown>): string {
  const path = join(testScratchDir(prefix), "switchyard.json");
  writeFileSync(path, JSON.stringify({ target, ...cfg }));
  return path;
}

/** CMD: waits until `file` exists, then exits 0. */
export const waitForFile = (file: string) => [
  process.execPath,
  "-e",
  "const f=process.argv[1];setInterval(()=>{if(require('fs').existsSync(f))process.exit(0)},50)",
  file,
];

/** A status condition as a controller writes it, changed now. */
export const condition = (type: string, status: "True" | "False", reason: string, message: string) => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: new Date().toISOString(),
});
