// Errors of installing the CRDs (installCrds). Each has a stable `code` so callers and
// tests match on codes, and a message that says what was wrong and how to fix it.
import { describeApiError } from "../../../lib/api-error.js";

/** installCrds was asked for a kind that does not exist. */
export class UnknownCrdKindError extends Error {
  readonly code = "SWITCHYARD_CRD_UNKNOWN_KIND";
  constructor(kind: string, known: readonly string[]) {
    super(`unknown Switchyard CRD kind "${kind}"; expected one of: ${known.join(", ")}`);
    this.name = "UnknownCrdKindError";
  }
}

/** A CRD was applied but the API server did not report it Established in time. */
export class CrdNotEstablishedError extends Error {
  readonly code = "SWITCHYARD_CRD_NOT_ESTABLISHED";
  constructor(name: string, timeoutMs: number, detail: string) {
    super(
      `CustomResourceDefinition ${name} was not Established within ${timeoutMs} ms (${detail}); ` +
        `check \`kubectl get crd ${name} -o yaml\` for NamesAccepted/Established conditions`,
    );
    this.name = "CrdNotEstablishedError";
  }
}

/** Applying a CRD failed (RBAC, an invalid schema refused by the API server, an outage). */
export class CrdInstallError extends Error {
  readonly code = "SWITCHYARD_CRD_INSTALL_FAILED";
  constructor(name: string, cause: unknown) {
    super(
      `failed to apply CustomResourceDefinition ${name}: ${describeApiError(cause)}; installing CRDs needs ` +
        `create/patch on customresourcedefinitions.apiextensions.k8s.io (cluster-admin or the chart's role)`,
      { cause },
    );
    this.name = "CrdInstallError";
  }
}
