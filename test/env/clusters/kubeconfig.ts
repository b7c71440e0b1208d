// Kubeconfig files for the test clusters, with every credential embedded so a
// file can be handed to kubectl, helm or @kubernetes/client-node as it is.
import { writeFileSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";

export interface KubeconfigInput {
  clusterName: string;
  server: string;
  caPem: string;
  user: string;
  /** Client certificate auth. */
  certPem?: string;
  keyPem?: string;
  /** Bearer token auth. */
  token?: string;
  /** Name to verify the server certificate against when `server` is an address it does not carry. */
  tlsServerName?: string;
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

export function kubeconfigYaml(input: KubeconfigInput): string {
  const user: Record<string, string> = {};
  if (input.certPem && input.keyPem) {
    user["client-certificate-data"] = b64(input.certPem);
    user["client-key-data"] = b64(input.keyPem);
  }
  if (input.token) user.token = input.token;
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: input.clusterName,
        cluster: {
          server: input.server,
          "certificate-authority-data": b64(input.caPem),
          ...(input.tlsServerName ? { "tls-server-name": input.tlsServerName } : {}),
        },
      },
    ],
    users: [{ name: input.user, user }],
    contexts: [{ name: input.clusterName, context: { cluster: input.clusterName, user: input.user } }],
    "current-context": input.clusterName,
  });
}

export function writeKubeconfig(path: string, input: KubeconfigInput): string {
  writeFileSync(path, kubeconfigYaml(input), { mode: 0o600 });
  return path;
}

export function loadKubeConfig(yamlOrPath: string): KubeConfig {
  const kc = new KubeConfig();
  if (yamlOrPath.includes("\n")) kc.loadFromString(yamlOrPath);
  else kc.loadFromFile(yamlOrPath);
  return kc;
}
