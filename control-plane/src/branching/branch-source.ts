// Where a branch copies from (DESIGN §7), resolved in the Default cluster on every attempt:
// `spec.source.fromEnv` reads the target container's environment variable from its pod
// template (a plain `value`, or `valueFrom` a Secret or ConfigMap key); explicit fields
// name the server, with the password in a Secret of the branch's namespace. The result
// carries the password, so it is never logged: messages name the variable or the Secret,
// never a value.
import type { V1Container, V1EnvVar, V1PodSpec } from "@kubernetes/client-node";
import type { BranchDatabaseSpec, BranchKind } from "../../../proto/api/v1alpha1/index.js";
import { BRANCH_ENGINES } from "../../../proto/api/v1alpha1/index.js";
import { resolveTarget, type TargetSource } from "../member/target-resolver.js";
import { BranchError, type BranchErrorKind } from "./branch-error.js";
import { parseSourceUrl, SourceUrlError, type SourceDatabase } from "./connection-url.js";

export const BRANCH_SOURCE_UNRESOLVED = "SWITCHYARD_BRANCH_SOURCE_UNRESOLVED";

/** Reads one key of a Secret or ConfigMap in a namespace; undefined when the object or key is absent. */
export interface KeyReader {
  secretKey(namespace: string, name: string, key: string): Promise<string | undefined>;
  configMapKey(namespace: string, name: string, key: string): Promise<string | undefined>;
}

/**
 * The source could not be resolved. Terminal: the CR itself is wrong (a variable that is
 * not a URL, an expansion the controller cannot follow); transient (the default): something
 * may still appear (the workload, the Secret) and the controller retries.
 */
export class BranchSourceError extends BranchError {
  readonly code = BRANCH_SOURCE_UNRESOLVED;

  constructor(reason: string, message: string, kind: BranchErrorKind = "transient") {
    super(reason, message, kind);
  }
}

export async function resolveBranchSource(
  kind: BranchKind,
  namespace: string,
  spec: BranchDatabaseSpec,
  targets: TargetSource,
  keys: KeyReader,
): Promise<SourceDatabase> {
  const source = spec.source;
  if (source.fromEnv) {
    const variable = source.fromEnv.name;
    const from = `${variable} of ${spec.target}`;
    const text = await envValue(namespace, spec.target, variable, targets, keys);
    try {
      return parseSourceUrl(kind, text, from);
    } catch (err) {
      if (err instanceof SourceUrlError)
        throw new BranchSourceError("SourceInvalid", err.message, "terminal");
      throw err;
    }
  }
  let password = "";
  if (source.passwordSecretRef) {
    const { name, key } = source.passwordSecretRef;
    const value = await keys.secretKey(namespace, name, key);
    if (value === undefined) {
      throw new BranchSourceError(
        "SourcePasswordMissing",
        `spec.source.passwordSecretRef: Secret ${name} in namespace ${namespace} has no key ${key}; create it or fix the reference`,
      );
    }
    password = value;
  }
  return {
    host: source.host!,
    port: source.port ?? BRANCH_ENGINES[kind].defaultPort,
    database: source.database!,
    user: source.user!,
    password,
    params: {},
  };
}

async function envValue(
  namespace: string,
  targetRef: string,
  variable: string,
  targets: TargetSource,
  keys: KeyReader,
): Promise<string> {
  const resolution = resolveTarget(targets, namespace, targetRef);
  if (!resolution.ok) throw new BranchSourceError("TargetNotFound", `spec.target: ${resolution.message}`);
  const { template, pods, container } = resolution.resolved;
  const podSpec: V1PodSpec | undefined = template?.spec ?? pods[0]?.spec;
  const c: V1Container | undefined = podSpec?.containers.find((x) => x.name === container);
  const entry: V1EnvVar | undefined = c?.env?.filter((e) => e.name === variable).pop();
  const where = `${targetRef} (container ${container})`;
  if (!entry) {
    throw new BranchSourceError(
      "SourceVariableMissing",
      `spec.source.fromEnv.name: ${where} has no env entry ${variable} (envFrom is not read); ` +
        "name the variable that holds the database URL, or give the source's host, database and user instead",
      "terminal",
    );
  }
  if (entry.value !== undefined) {
    if (/\$\([A-Za-z_][A-Za-z0-9_]*\)/.test(entry.value)) {
      throw new BranchSourceError(
        "SourceInvalid",
        `spec.source.fromEnv.name: ${variable} of ${where} refers to other variables with $(...), ` +
          "which the branching controller does not expand; give the source's fields explicitly",
        "terminal",
      );
    }
    return entry.value;
  }
  const secretRef = entry.valueFrom?.secretKeyRef;
  const mapRef = entry.valueFrom?.configMapKeyRef;
  const ref = secretRef ?? mapRef;
  if (ref?.name && ref.key) {
    const value = secretRef
      ? await keys.secretKey(namespace, ref.name, ref.key)
      : await keys.configMapKey(namespace, ref.name, ref.key);
    if (value === undefined) {
      throw new BranchSourceError(
        "SourceVariableMissing",
        `spec.source.fromEnv.name: ${variable} of ${where} comes from ${secretRef ? "Secret" : "ConfigMap"} ` +
          `${ref.name} key ${ref.key}, which does not exist in namespace ${namespace}`,
      );
    }
    return value;
  }
  throw new BranchSourceError(
    "SourceInvalid",
    `spec.source.fromEnv.name: ${variable} of ${where} is set from a field or resource reference, ` +
      "not a value, Secret or ConfigMap key; give the source's fields explicitly",
    "terminal",
  );
}
