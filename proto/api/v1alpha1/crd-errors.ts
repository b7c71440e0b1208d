// Errors of the CRD API itself (building manifests from the TypeBox definitions). The
// errors of installing CRDs live with the installer in control-plane/src/runtime. Each has a
// stable `code` so callers and tests match on codes, and a message that says what was
// wrong and how to fix it.

/** A TypeBox schema uses something the Kubernetes structural schema cannot express. */
export class CrdSchemaError extends Error {
  readonly code = "SWITCHYARD_CRD_SCHEMA_INVALID";
  constructor(detail: string) {
    super(
      `CRD schema cannot be translated exactly: ${detail}. Rewrite it with the helpers in schema-primitives.ts.`,
    );
    this.name = "CrdSchemaError";
  }
}
