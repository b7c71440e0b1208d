// The shape every Switchyard CRD is declared in, and the one function that turns such a
// declaration into a CustomResourceDefinition manifest. Kind modules declare schemas and
// names; everything Kubernetes-specific about the manifest (status subresource,
// structural root, labels) is decided here once.
import type { Static, TSchema } from "@sinclair/typebox";
import type { V1ObjectMeta } from "@kubernetes/client-node";
import { CATEGORY, GROUP, VERSION } from "./api-group.js";
import type { CelRule } from "./schema-primitives.js";
import { toStructuralSchema, type JsonSchemaProps } from "./structural-schema.js";

export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description: string;
  /** 0 shows in `kubectl get`; higher values only with `-o wide`. */
  priority?: number;
}

export interface CrdDefinition<Spec extends TSchema = TSchema, Status extends TSchema = TSchema> {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  scope: "Namespaced" | "Cluster";
  description: string;
  spec: Spec;
  status: Status;
  /** Rules on the whole object; the only place CEL may read `metadata.name`. */
  rootRules?: CelRule[];
  printerColumns: PrinterColumn[];
}

/** A stored custom resource of a kind: the envelope the API server returns. */
export interface CustomResource<Spec, Status> {
  apiVersion: string;
  kind: string;
  metadata: V1ObjectMeta;
  spec: Spec;
  status?: Status;
}

export type ResourceOf<D> =
  D extends CrdDefinition<infer Spec, infer Status> ? CustomResource<Static<Spec>, Static<Status>> : never;

/** The CustomResourceDefinition manifest, as plain JSON the API server reads. */
export interface CrdManifest {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string; labels: Record<string, string> };
  spec: JsonSchemaProps;
}

export function crdName(def: Pick<CrdDefinition, "plural">): string {
  return `${def.plural}.${GROUP}`;
}

export function buildCrdManifest(def: CrdDefinition): CrdManifest {
  const root: JsonSchemaProps = {
    type: "object",
    description: def.description,
    required: ["spec"],
    properties: {
      apiVersion: { type: "string", description: "Versioned schema of this representation of an object." },
      kind: { type: "string", description: "REST resource this object represents." },
      metadata: { type: "object" },
      spec: toStructuralSchema(def.spec),
      status: toStructuralSchema(def.status),
    },
  };
  if (def.rootRules?.length) root["x-kubernetes-validations"] = def.rootRules;
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: crdName(def),
      labels: { "app.kubernetes.io/part-of": "switchyard", "app.kubernetes.io/component": "crd" },
    },
    spec: {
      group: GROUP,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        shortNames: def.shortNames,
        categories: [CATEGORY],
      },
      scope: def.scope,
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            ...def.printerColumns,
            { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
          ],
          schema: { openAPIV3Schema: root },
        },
      ],
    },
  };
}
