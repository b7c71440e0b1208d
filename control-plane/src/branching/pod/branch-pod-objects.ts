// What the `pod` provisioner makes for one branch, as plain manifests (no client here): a
// database Pod running the configured image, which initialises its own database from the
// image's environment contract and seeds it with a generated script from
// /docker-entrypoint-initdb.d/ (pg-pod-seed.ts, mysql-pod-seed.ts); a ClusterIP Service in
// front of it; and a seed Secret holding that script and the source password (and what else
// the engine's contract needs, e.g. MariaDB's generated root password). All three are named
// from the branch's database name, labelled with it and with the CR, and owned by the branch
// CR (garbage-collected with it). The branch user's password is read from the branch's
// credentials Secret, which the controller writes before the provisioner is called.
import { createHash, randomBytes } from "node:crypto";
import type {
  V1EnvVar,
  V1ObjectMeta,
  V1Pod,
  V1ResourceRequirements,
  V1Secret,
  V1Service,
} from "@kubernetes/client-node";
import {
  API_VERSION,
  BRANCH_SECRET_LABEL,
  GROUP,
  branchSecretName,
  type BranchKind,
} from "../../../../proto/api/v1alpha1/index.js";
import type { BranchCreateRequest } from "../branch-provisioner.js";
import { mysqlSeedScript } from "./mysql-pod-seed.js";
import { pgSeedScript, SOURCE_PASSWORD_ENV } from "./pg-pod-seed.js";

/**
 * Label naming the objects' common name on every object the pod provisioner makes: the
 * Service selects the pod by it, and nothing without it is ever replaced or deleted. Each
 * object also carries the credentials Secret's label (`switchyard.dev/branch=<kind>.<CR name>`),
 * so one selector lists everything of a branch.
 */
export const BRANCH_POD_LABEL = `${GROUP}/branch-pod`;
/** Annotation on the Pod: digest of its spec and seed script, so a changed one is made again. */
export const BRANCH_POD_SPEC_ANNOTATION = `${GROUP}/branch-pod-spec`;
/** Key of the seed Secret holding the script, and the file name it gets in the init directory. */
export const SEED_SCRIPT_KEY = "seed.sh";
export const SEED_SCRIPT_FILE = "50-switchyard-seed.sh";
export const SOURCE_PASSWORD_KEY = "source-password";
/** Where the stock images run init scripts from. */
export const INIT_DIR = "/docker-entrypoint-initdb.d";
export const DATABASE_CONTAINER = "database";

/** An engine's image contract: its port, data directory and environment. */
export interface PodEngine {
  kind: BranchKind;
  port: number;
  portName: string;
  /** Where the data emptyDir is mounted. */
  dataMount: string;
  /**
   * The image contract's variables; `password` is the branch Secret's password key, `seedKey`
   * a key of the seed Secret (one of `seedSecrets`).
   */
  env(
    request: BranchCreateRequest,
    password: V1EnvVar["valueFrom"],
    seedKey: (key: string) => V1EnvVar["valueFrom"],
  ): V1EnvVar[];
  seedScript(request: BranchCreateRequest): string;
  /** Further seed Secret entries the environment refers to (e.g. a generated root password). */
  seedSecrets?(): Record<string, string>;
}

/** The official `postgres` image's contract (Debian-based images of the same contract too). */
export const POSTGRES_POD_ENGINE: PodEngine = {
  kind: "PgBranchDatabase",
  port: 5432,
  portName: "postgres",
  dataMount: "/var/lib/postgresql/data",
  env: (request, password) => [
    { name: "POSTGRES_USER", value: request.identifiers.user },
    { name: "POSTGRES_PASSWORD", valueFrom: password },
    { name: "POSTGRES_DB", value: request.identifiers.database },
    // A directory below the mount: initdb must own its data directory, the volume's root is root's.
    { name: "PGDATA", value: "/var/lib/postgresql/data/pgdata" },
  ],
  seedScript: pgSeedScript,
};

/** Seed Secret key of the MariaDB pod's root password (generated; root is reachable inside the pod only). */
export const ROOT_PASSWORD_KEY = "root-password";

/**
 * The official `mariadb` image's contract: MARIADB_USER/PASSWORD/DATABASE make the branch user
 * with ALL on the branch database only; root gets a generated password and no account beyond
 * localhost (MARIADB_ROOT_HOST), so only the seed script inside the pod uses it.
 */
export const MARIADB_POD_ENGINE: PodEngine = {
  kind: "MysqlBranchDatabase",
  port: 3306,
  portName: "mysql",
  dataMount: "/var/lib/mysql",
  env: (request, password, seedKey) => [
    { name: "MARIADB_USER", value: request.identifiers.user },
    { name: "MARIADB_PASSWORD", valueFrom: password },
    { name: "MARIADB_DATABASE", value: request.identifiers.database },
    { name: "MARIADB_ROOT_PASSWORD", valueFrom: seedKey(ROOT_PASSWORD_KEY) },
    { name: "MARIADB_ROOT_HOST", value: "localhost" },
  ],
  seedScript: (request) => mysqlSeedScript(request, "/var/lib/mysql"),
  seedSecrets: () => ({ [ROOT_PASSWORD_KEY]: randomBytes(24).toString("base64url") }),
};

export interface BranchPodSettings {
  /** The database image, e.g. `postgres:17`. */
  image: string;
  /** Container resources; default requests 50m CPU and 128 MiB, no limits. */
  resources?: V1ResourceRequirements;
  /** Numeric uid (and gid) the database runs as; default 999 (the official images' user). */
  runAsUser?: number;
}

export interface BranchPodObjects {
  /** The common name: a DNS label from the database name (`sy_shop_x` → `sy-shop-x`). */
  name: string;
  pod: V1Pod;
  service: V1Service;
  seedSecret: V1Secret;
}

/** The objects' name for a branch database name (generated: `sy_` + `[a-z0-9_]`, ≤ 64). */
export function branchPodName(database: string): string {
  return database.replaceAll("_", "-").slice(0, 63).replace(/-+$/, "");
}

export const seedSecretName = (name: string) => `${name}-seed`;

/** Whether `meta` is an object the pod provisioner made for the branch `name`. */
export function madeForBranch(meta: V1ObjectMeta | undefined, name: string): boolean {
  return meta?.labels?.[BRANCH_POD_LABEL] === name;
}

const DEFAULT_RESOURCES: V1ResourceRequirements = { requests: { cpu: "50m", memory: "128Mi" } };

export function branchPodObjects(
  engine: PodEngine,
  request: BranchCreateRequest,
  settings: BranchPodSettings,
): BranchPodObjects {
  const { namespace, name: crName, uid } = request.cr;
  const name = branchPodName(request.identifiers.database);
  const uidGid = settings.runAsUser ?? 999;
  const meta = (objectName: string): V1ObjectMeta => ({
    name: objectName,
    namespace,
    labels: {
      [BRANCH_POD_LABEL]: name,
      [BRANCH_SECRET_LABEL]: `${engine.kind.toLowerCase()}.${crName}`,
      "app.kubernetes.io/managed-by": "switchyard",
      "app.kubernetes.io/component": "database-branch",
    },
    ...(uid
      ? {
          ownerReferences: [
            { apiVersion: API_VERSION, kind: engine.kind, name: crName, uid, blockOwnerDeletion: false },
          ],
        }
      : {}),
  });
  const script = engine.seedScript(request);
  const seedSecret: V1Secret = {
    metadata: meta(seedSecretName(name)),
    type: "Opaque",
    data: {
      [SEED_SCRIPT_KEY]: Buffer.from(script).toString("base64"),
      [SOURCE_PASSWORD_KEY]: Buffer.from(request.source.password ?? "").toString("base64"),
      ...Object.fromEntries(
        Object.entries(engine.seedSecrets?.() ?? {}).map(([k, v]) => [k, Buffer.from(v).toString("base64")]),
      ),
    },
  };
  const spec: V1Pod["spec"] = {
    restartPolicy: "Always",
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    terminationGracePeriodSeconds: 10,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: uidGid,
      runAsGroup: uidGid,
      fsGroup: uidGid,
      seccompProfile: { type: "RuntimeDefault" },
    },
    containers: [
      {
        name: DATABASE_CONTAINER,
        image: settings.image,
        imagePullPolicy: "IfNotPresent",
        env: [
          ...engine.env(
            request,
            { secretKeyRef: { name: branchSecretName(engine.kind, crName), key: "password" } },
            (key) => ({ secretKeyRef: { name: seedSecretName(name), key } }),
          ),
          {
            name: SOURCE_PASSWORD_ENV,
            valueFrom: { secretKeyRef: { name: seedSecretName(name), key: SOURCE_PASSWORD_KEY } },
          },
        ],
        ports: [{ name: engine.portName, containerPort: engine.port, protocol: "TCP" }],
        // The seeding server listens on a socket only: the port answers once seeding is done.
        readinessProbe: {
          tcpSocket: { port: engine.port },
          periodSeconds: 1,
          failureThreshold: 3,
          timeoutSeconds: 1,
        },
        terminationMessagePolicy: "FallbackToLogsOnError",
        resources: settings.resources ?? DEFAULT_RESOURCES,
        securityContext: {
          allowPrivilegeEscalation: false,
          privileged: false,
          capabilities: { drop: ["ALL"] },
        },
        volumeMounts: [
          { name: "data", mountPath: engine.dataMount },
          { name: "seed", mountPath: INIT_DIR, readOnly: true },
        ],
      },
    ],
    volumes: [
      { name: "data", emptyDir: {} },
      {
        name: "seed",
        secret: {
          secretName: seedSecretName(name),
          // Executable, so the entrypoint runs it in its own shell rather than sourcing it.
          items: [{ key: SEED_SCRIPT_KEY, path: SEED_SCRIPT_FILE, mode: 0o555 }],
        },
      },
    ],
  };
  const digest = createHash("sha256").update(JSON.stringify({ spec, script })).digest("hex").slice(0, 16);
  const podMeta = meta(name);
  const pod: V1Pod = {
    metadata: { ...podMeta, annotations: { [BRANCH_POD_SPEC_ANNOTATION]: digest } },
    spec,
  };
  const service: V1Service = {
    metadata: meta(name),
    spec: {
      type: "ClusterIP",
      selector: { [BRANCH_POD_LABEL]: name },
      ports: [{ name: engine.portName, port: engine.port, targetPort: engine.port, protocol: "TCP" }],
    },
  };
  return { name, pod, service, seedSecret };
}
