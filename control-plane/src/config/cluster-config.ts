// The typed multi-cluster configuration and its validation (DESIGN §1). The non-secret
// part comes from the `clusters-config.yaml` key of a ConfigMap (what the Helm chart
// renders from `multiCluster` values); credentials come from per-cluster Secrets (see
// credential-secret.ts). Every rule is checked here, once, for the start-up check and
// for every live reload, and each violation becomes a ClusterConfigError naming the
// cluster, the field and the fix.
import { X509Certificate } from "node:crypto";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { AUTH_TYPES, type AuthType } from "../credentials/credential-source.js";
import { ClusterConfigError, ClusterConfigErrors, keyInPath, quoted } from "./cluster-config-error.js";
import { clusterLabelOf, DNS_LABEL, EKS_CLUSTER_NAME } from "./cluster-name.js";

export { DNS_LABEL } from "./cluster-name.js";

/** The ConfigMap key holding the YAML document. */
export const CLUSTERS_CONFIG_KEY = "clusters-config.yaml";

export interface RemoteClusterConfig {
  /**
   * Cluster name (RFC 1123 label) in object names, labels and status: the configuration key,
   * or for an eks key that is not a label, the label derived from it (cluster-name.ts).
   */
  readonly name: string;
  /** eks only: the EKS cluster name signed into tokens — the configuration key as written. */
  readonly eksClusterName?: string | undefined;
  readonly authType: AuthType;
  /** https URL of the cluster's API server. */
  readonly server: string;
  /** PEM of the CA that signs the API server's certificate (decoded caData); undefined = system roots. */
  readonly caPem: string | undefined;
  /** AWS region of the STS endpoint (eks only). */
  readonly region: string | undefined;
  /** Namespace Switchyard runs in on that cluster. Default `switchyard`. */
  readonly namespace: string;
  readonly isDefault: boolean;
}

export interface MultiClusterConfig {
  readonly enabled: boolean;
  /** This (the Primary) cluster's name. */
  readonly clusterName: string;
  /** The Default cluster (stateful operations); may be clusterName when the Primary is a workload cluster. */
  readonly defaultCluster: string;
  readonly managementOnly: boolean;
  /** Remote clusters in name order. Empty when multi-cluster is disabled. */
  readonly remotes: readonly RemoteClusterConfig[];
}

const remoteSchema = z.looseObject({
  authType: z.unknown().optional(),
  server: z.unknown().optional(),
  caData: z.unknown().optional(),
  region: z.unknown().optional(),
  namespace: z.unknown().optional(),
  isDefault: z.unknown().optional(),
});

const rootSchema = z.looseObject({
  enabled: z.unknown().optional(),
  clusterName: z.unknown().optional(),
  defaultCluster: z.unknown().optional(),
  managementOnly: z.unknown().optional(),
  clusters: z.record(z.string(), z.unknown()).optional(),
});

const EKS_HOST = /^[a-z0-9]+\.[a-z0-9]+\.([a-z]{2}(?:-gov)?-[a-z]+-\d)\.eks\.amazonaws\.com$/;

/**
 * Validates a parsed configuration document. Returns the typed config or throws
 * ClusterConfigErrors listing every problem found (not just the first).
 */
export function validateClusterConfig(doc: unknown): MultiClusterConfig {
  const errors: ClusterConfigError[] = [];
  const bad = (cluster: string | undefined, field: string, problem: string, fix: string) =>
    errors.push(new ClusterConfigError("SWITCHYARD_CLUSTER_CONFIG_INVALID", cluster, field, problem, fix));

  const root = rootSchema.safeParse(doc ?? {});
  if (!root.success) {
    throw new ClusterConfigErrors([
      new ClusterConfigError(
        "SWITCHYARD_CLUSTER_CONFIG_INVALID",
        undefined,
        root.error.issues[0]?.path.join(".") || "(document)",
        "is not a mapping of the expected shape",
        "write clusters-config.yaml as a YAML mapping with enabled, clusterName, defaultCluster, managementOnly and clusters",
      ),
    ]);
  }
  const r = root.data;
  const bool = (cluster: string | undefined, field: string, v: unknown, dflt: boolean): boolean => {
    if (v === undefined || v === null) return dflt;
    if (typeof v === "boolean") return v;
    bad(cluster, field, `must be true or false, got ${quoted(v)}`, `set ${field} to true or false`);
    return dflt;
  };
  const enabled = bool(undefined, "enabled", r.enabled, false);
  const managementOnly = bool(undefined, "managementOnly", r.managementOnly, false);

  let clusterName = "";
  if (typeof r.clusterName !== "string" || r.clusterName === "") {
    if (enabled)
      bad(
        undefined,
        "clusterName",
        "is required",
        "set clusterName to this (the Primary) cluster's name, e.g. primary",
      );
  } else if (!DNS_LABEL.test(r.clusterName)) {
    bad(
      undefined,
      "clusterName",
      `${quoted(r.clusterName)} is not an RFC 1123 label`,
      "use lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit",
    );
  } else clusterName = r.clusterName;

  if (!enabled) {
    if (errors.length > 0) throw new ClusterConfigErrors(errors);
    return { enabled: false, clusterName, defaultCluster: clusterName, managementOnly: false, remotes: [] };
  }

  const remotes: RemoteClusterConfig[] = [];
  const entries = Object.entries(r.clusters ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  // Each key's cluster name: the key itself, or the label an EKS name derives (undefined: neither).
  const nameOf = new Map<string, string>();
  for (const [key, raw] of entries) {
    if (DNS_LABEL.test(key)) nameOf.set(key, key);
    else if (EKS_CLUSTER_NAME.test(key) && (raw as { authType?: unknown } | null)?.authType === "eks")
      nameOf.set(key, clusterLabelOf(key));
  }
  const keysOf = new Map<string, string[]>();
  for (const [key, name] of nameOf) keysOf.set(name, [...(keysOf.get(name) ?? []), key]);
  for (const [name, keys] of keysOf) {
    if (keys.length < 2) continue;
    bad(
      undefined,
      "clusters",
      `${keys.map(quoted).join(", ")} become the same cluster name ${quoted(name)}`,
      "rename all but one: object names and labels use an EKS cluster name lowercased, with '_' as '-'",
    );
  }
  const keyOf = new Map<string, string>(); // cluster name → its key, for messages
  for (const [key, raw] of entries) {
    const at = (f: string) => `clusters.${keyInPath(key)}.${f}`;
    const name = nameOf.get(key);
    if (name === undefined) {
      bad(
        key,
        `clusters.${keyInPath(key)}`,
        `${quoted(key)} is not an RFC 1123 label`,
        "rename the key: lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit (only an eks cluster may keep its EKS name)",
      );
      continue;
    }
    if (keysOf.get(name)!.length > 1) continue;
    if (name === clusterName) {
      bad(
        key,
        `clusters.${keyInPath(key)}`,
        name === key
          ? "names the Primary itself"
          : `becomes the cluster name ${quoted(name)}, the Primary's own`,
        `remove it from clusters; the Primary is reached in-cluster, and defaultCluster: ${name} makes it the Default`,
      );
      continue;
    }
    const parsed = remoteSchema.safeParse(raw ?? {});
    if (!parsed.success) {
      bad(
        key,
        `clusters.${keyInPath(key)}`,
        "is not a mapping",
        "give the cluster authType, server and caData",
      );
      continue;
    }
    const c = parsed.data;
    let authType: AuthType | undefined;
    if (c.authType === undefined || c.authType === null || c.authType === "") {
      bad(
        key,
        at("authType"),
        "is required (there is no default)",
        `set authType to one of ${AUTH_TYPES.join(", ")}`,
      );
    } else if (!(AUTH_TYPES as readonly unknown[]).includes(c.authType)) {
      bad(
        key,
        at("authType"),
        `${quoted(c.authType)} is not supported`,
        `set authType to one of ${AUTH_TYPES.join(", ")} (case matters)`,
      );
    } else authType = c.authType as AuthType;

    let server = "";
    if (typeof c.server !== "string" || c.server === "") {
      bad(
        key,
        at("server"),
        "is required",
        "set server to the API server URL, e.g. https://api.east.example.com:6443",
      );
    } else {
      try {
        const u = new URL(c.server);
        if (u.protocol !== "https:") throw new Error("not https");
        server = c.server.replace(/\/+$/, "");
      } catch {
        bad(
          key,
          at("server"),
          `${quoted(c.server)} is not an https URL`,
          "set server to https://<host>[:port]",
        );
      }
    }

    let caPem: string | undefined;
    if (c.caData === undefined || c.caData === null || c.caData === "") {
      if (authType === "eks")
        bad(
          key,
          at("caData"),
          "is required for authType eks",
          "set caData to the base64 CA bundle (aws eks describe-cluster --query cluster.certificateAuthority.data)",
        );
    } else if (typeof c.caData !== "string") {
      bad(
        key,
        at("caData"),
        "must be a base64 string",
        "set caData to the base64-encoded PEM CA certificate",
      );
    } else {
      const pem = Buffer.from(c.caData, "base64").toString("utf8");
      try {
        if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new Error("no PEM");
        new X509Certificate(pem);
        caPem = pem;
      } catch {
        bad(
          key,
          at("caData"),
          "is not a base64-encoded PEM certificate",
          "set caData to base64 of the CA's PEM (as in a kubeconfig's certificate-authority-data)",
        );
      }
    }

    let region: string | undefined;
    if (c.region !== undefined && c.region !== null && c.region !== "") {
      if (typeof c.region !== "string" || !/^[a-z]{2}(-gov)?-[a-z]+-\d$/.test(c.region))
        bad(key, at("region"), `${quoted(c.region)} is not an AWS region`, "set region like eu-north-1");
      else region = c.region;
    }
    if (authType === "eks" && region === undefined && server) {
      region = EKS_HOST.exec(new URL(server).hostname)?.[1];
      if (region === undefined)
        bad(
          key,
          at("region"),
          "is required for authType eks when server is not an *.eks.amazonaws.com endpoint",
          "set region to the cluster's AWS region (STS is called in that region)",
        );
    }

    let namespace = "switchyard";
    if (c.namespace !== undefined && c.namespace !== null && c.namespace !== "") {
      if (typeof c.namespace !== "string" || !DNS_LABEL.test(c.namespace))
        bad(key, at("namespace"), `${quoted(c.namespace)} is not a namespace name`, "use an RFC 1123 label");
      else namespace = c.namespace;
    }
    const isDefault = bool(key, at("isDefault"), c.isDefault, false);
    if (authType) {
      keyOf.set(name, key);
      const eksClusterName = authType === "eks" ? key : undefined;
      remotes.push({ name, eksClusterName, authType, server, caPem, region, namespace, isDefault });
    }
  }

  // Default cluster: `defaultCluster` (a key, or the cluster name an EKS key becomes), or the
  // one remote marked isDefault.
  const marked = remotes.filter((c) => c.isDefault).map((c) => keyOf.get(c.name)!);
  if (marked.length > 1)
    bad(
      marked[1],
      `clusters.${keyInPath(marked[1]!)}.isDefault`,
      `more than one cluster is marked isDefault (${marked.map(keyInPath).join(", ")})`,
      "mark exactly one cluster isDefault, or set defaultCluster instead",
    );
  let defaultCluster = "";
  const written = r.defaultCluster;
  if (typeof written === "string" && written !== "") {
    defaultCluster = nameOf.get(written) ?? written;
    if (marked.length === 1 && nameOf.get(marked[0]!) !== defaultCluster)
      bad(
        marked[0],
        `clusters.${keyInPath(marked[0]!)}.isDefault`,
        `contradicts defaultCluster: ${keyInPath(written)}`,
        "remove isDefault or make defaultCluster name the same cluster",
      );
  } else if (written !== undefined && written !== null && written !== "") {
    bad(undefined, "defaultCluster", "must be a cluster name", "set defaultCluster to a cluster name");
  } else if (marked.length === 1) defaultCluster = nameOf.get(marked[0]!)!;

  const configured = new Set(Object.keys(r.clusters ?? {}));
  const known = new Set([...configured, ...nameOf.values()]);
  if (defaultCluster === "") {
    bad(
      undefined,
      "defaultCluster",
      "is required when multi-cluster is enabled",
      managementOnly
        ? "set defaultCluster to one of the remote clusters"
        : `set defaultCluster to one of: ${[clusterName, ...configured].filter(Boolean).map(keyInPath).join(", ")}`,
    );
  } else if (defaultCluster === clusterName && clusterName !== "") {
    if (managementOnly)
      bad(
        undefined,
        "defaultCluster",
        `names the Primary ${quoted(clusterName)}, which is managementOnly and hosts no sessions`,
        `set defaultCluster to one of the remote clusters (${[...configured].map(keyInPath).join(", ") || "none configured"}), or set managementOnly: false`,
      );
  } else if (!known.has(defaultCluster)) {
    bad(
      undefined,
      "defaultCluster",
      `${quoted(defaultCluster)} is not a configured cluster`,
      `set defaultCluster to one of: ${[...(managementOnly ? [] : [clusterName]), ...configured].filter(Boolean).map(keyInPath).join(", ")}`,
    );
  }
  if (managementOnly && configured.size === 0)
    bad(undefined, "clusters", "is empty but managementOnly is true", "add at least one workload cluster");

  if (errors.length > 0) throw new ClusterConfigErrors(errors);
  return { enabled, clusterName, defaultCluster, managementOnly, remotes };
}

/** Parses the YAML text of the ConfigMap key and validates it. */
export function parseClusterConfig(yamlText: string): MultiClusterConfig {
  let doc: unknown;
  try {
    // Warnings (an unknown directive, a collection used as a key) would go to stderr, outside
    // the logger; what matters in them fails validation below with the field named.
    doc = parseYaml(yamlText, { logLevel: "error" });
  } catch (err) {
    throw new ClusterConfigErrors([
      new ClusterConfigError(
        "SWITCHYARD_CLUSTER_CONFIG_INVALID",
        undefined,
        CLUSTERS_CONFIG_KEY,
        `is not valid YAML (${(err as Error).message.split("\n")[0]})`,
        "fix the YAML syntax of the ConfigMap key",
      ),
    ]);
  }
  return validateClusterConfig(doc);
}
