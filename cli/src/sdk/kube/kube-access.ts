// The user's own Kubernetes credentials: loads a kubeconfig (file, $KUBECONFIG or the
// default location) with an optional context, and turns API failures into CLI errors that
// name the verb, resource and namespace — so an RBAC denial says exactly which permission
// to ask for instead of printing a raw 403 body.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { ApiException, KubeConfig } from "@kubernetes/client-node";
import { apiStatusMessage } from "../../../../lib/api-error.js";
import { CliError, CliErrorCode } from "../cli-errors.js";

export interface KubeAccessOptions {
  /** Path of a kubeconfig file (default: $KUBECONFIG, then ~/.kube/config). */
  kubeconfig?: string;
  /** Context to use (default: the kubeconfig's current context). */
  context?: string;
}

/**
 * Where a kubeconfig would come from without --kubeconfig; undefined when there is none (no
 * $KUBECONFIG, no ~/.kube/config, not in a pod). The client would then fall back to
 * http://localhost:8080, and its error about that would hide the real problem.
 */
export function defaultKubeconfigSource(
  env: NodeJS.ProcessEnv = process.env,
  home: string = homedir(),
): string | undefined {
  if (env.KUBECONFIG) return `$KUBECONFIG (${env.KUBECONFIG})`;
  const file = join(home, ".kube", "config");
  if (existsSync(file)) return file;
  if (env.KUBERNETES_SERVICE_HOST) return "the pod's service account";
  return undefined;
}

export function loadKubeConfig(options: KubeAccessOptions = {}): KubeConfig {
  if (!options.kubeconfig && defaultKubeconfigSource() === undefined)
    throw new CliError(
      CliErrorCode.KUBECONFIG,
      "no kubeconfig: KUBECONFIG is not set and ~/.kube/config does not exist; pass --kubeconfig <file> " +
        "or set KUBECONFIG to the Primary cluster's kubeconfig",
    );
  const kc = new KubeConfig();
  try {
    if (options.kubeconfig) kc.loadFromFile(options.kubeconfig);
    else kc.loadFromDefault();
  } catch (err) {
    throw new CliError(
      CliErrorCode.KUBECONFIG,
      `cannot read kubeconfig ${options.kubeconfig ?? "(default location)"}: ${(err as Error).message}; ` +
        "pass --kubeconfig or set KUBECONFIG",
      { cause: err },
    );
  }
  if (options.context) {
    if (!kc.getContextObject(options.context)) {
      const known = kc.getContexts().map((c) => c.name);
      throw new CliError(
        CliErrorCode.KUBECONFIG,
        `context "${options.context}" is not in the kubeconfig; known contexts: ${known.join(", ") || "none"}`,
      );
    }
    kc.setCurrentContext(options.context);
  }
  if (!kc.getCurrentCluster()) {
    throw new CliError(
      CliErrorCode.KUBECONFIG,
      "the kubeconfig has no current cluster; pick one with --context or `kubectl config use-context`",
    );
  }
  return kc;
}

/** The namespace of the kubeconfig's current context, if it names one. */
export function contextNamespace(kc: KubeConfig): string | undefined {
  return kc.getContextObject(kc.getCurrentContext())?.namespace || undefined;
}

export interface KubeAction {
  verb: string;
  /** Plural resource with its group, e.g. "multiclustersessions.switchyard.dev". */
  resource: string;
  namespace?: string;
  name?: string;
}

/** Wraps an API failure of `action` into a CliError; a 403 names the missing permission. */
export function explainKubeError(err: unknown, action: KubeAction, kc?: KubeConfig): CliError {
  if (err instanceof CliError) return err;
  const where = action.namespace ? ` in namespace "${action.namespace}"` : "";
  const what = `${action.verb} ${action.resource}${action.name ? ` "${action.name}"` : ""}${where}`;
  if (err instanceof ApiException) {
    const detail = apiStatusMessage(err.body) || err.message;
    if (err.code === 403) {
      const user = kc?.getCurrentUser()?.name;
      return new CliError(
        CliErrorCode.FORBIDDEN,
        `not allowed to ${what}${user ? ` as kubeconfig user "${user}"` : ""}: ${detail}. ` +
          `Ask a cluster admin for a Role granting "${action.verb}" on "${action.resource}"${where}, ` +
          "or use a context that has it (--context).",
        { cause: err },
      );
    }
    if (err.code === 401)
      return new CliError(
        CliErrorCode.FORBIDDEN,
        `the API server did not accept your credentials while trying to ${what}: ${detail}; refresh your kubeconfig credentials`,
        { cause: err },
      );
    if (err.code === 404 && /could not find the requested resource|the server could not find/i.test(detail))
      return new CliError(
        CliErrorCode.NOT_INSTALLED,
        `cannot ${what}: the API server does not serve ${action.resource}. Is Switchyard installed on this cluster (--context)?`,
        { cause: err },
      );
    return new CliError(CliErrorCode.KUBE_API, `failed to ${what}: HTTP ${err.code} ${detail}`, {
      cause: err,
    });
  }
  const msg = (err as Error)?.message ?? String(err);
  return new CliError(
    CliErrorCode.KUBE_API,
    `failed to ${what}: ${msg}. Check that the cluster in your kubeconfig is reachable.`,
    { cause: err },
  );
}
