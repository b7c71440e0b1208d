// What the CLI learns from the cluster's SwitchyardOperator singleton: the session mode
// (a MultiClusterSession when the install advertises MultiClusterPrimary, a single
// ClusterSession otherwise — the user's config never says), the routers' URL and the
// health of every connected cluster for `switchyard status`.
import type { KubeConfig } from "@kubernetes/client-node";
import {
  OPERATOR_OBJECT_NAME,
  switchyardOperatorClient,
  type SwitchyardOperator,
} from "../../../../proto/api/v1alpha1/index.js";
import { CliError, CliErrorCode } from "../cli-errors.js";
import { explainKubeError } from "./kube-access.js";

export type SessionMode = "multi-cluster" | "single-cluster";

export async function readOperator(kc: KubeConfig): Promise<SwitchyardOperator> {
  let op: SwitchyardOperator | undefined;
  try {
    op = await switchyardOperatorClient(kc, { fieldManager: "switchyard-cli" }).get({
      name: OPERATOR_OBJECT_NAME,
    });
  } catch (err) {
    throw explainKubeError(
      err,
      { verb: "get", resource: "switchyardoperators.switchyard.dev", name: OPERATOR_OBJECT_NAME },
      kc,
    );
  }
  if (!op)
    throw new CliError(
      CliErrorCode.NOT_INSTALLED,
      `Switchyard is not running on cluster ${kc.getCurrentCluster()?.server ?? "?"}: there is no ` +
        `SwitchyardOperator "${OPERATOR_OBJECT_NAME}". Install the chart there, or pick the Primary cluster with --context.`,
    );
  return op;
}

export function sessionModeOf(op: SwitchyardOperator): SessionMode {
  return op.status?.supportedFeatures?.includes("MultiClusterPrimary") ? "multi-cluster" : "single-cluster";
}

/** ws(s):// base URL of the routers: the override when given, else the operator's routerEndpoint. */
export function routerBaseUrl(op: SwitchyardOperator | undefined, override?: string): string {
  const raw = override ?? op?.status?.routerEndpoint;
  if (!raw)
    throw new CliError(
      CliErrorCode.NO_ROUTER_ENDPOINT,
      "the SwitchyardOperator status has no routerEndpoint yet (is the control plane running?); " +
        "pass --router wss://host:port to connect anyway",
    );
  return normalizeRouterUrl(raw);
}

/** Accepts http(s):// or ws(s)://, drops a trailing slash. */
export function normalizeRouterUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      `router URL "${raw}" is not a URL; use e.g. wss://router.example:8443`,
    );
  }
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  else if (u.protocol !== "ws:" && u.protocol !== "wss:")
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      `router URL "${raw}" must use ws://, wss://, http:// or https://`,
    );
  return u.toString().replace(/\/+$/, "");
}
