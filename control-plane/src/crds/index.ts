// Public surface of the Switchyard CRDs: constants, TypeScript types, schemas, manifests,
// installCrds and thin typed clients. Everything is derived from the TypeBox definitions
// in the kind modules; the YAML under charts/switchyard/crds is generated from the same.
import type { KubeConfig } from "@kubernetes/client-node";
import { clusterSessionCrd, type ClusterSessionSpec, type ClusterSessionStatus } from "./cluster-session.js";
import { CustomResourceClient } from "./custom-resource-client.js";
import {
  multiClusterSessionCrd,
  type MultiClusterSessionSpec,
  type MultiClusterSessionStatus,
} from "./multi-cluster-session.js";
import {
  switchyardOperatorCrd,
  type SwitchyardOperatorSpec,
  type SwitchyardOperatorStatus,
} from "./switchyard-operator.js";

export * from "./api-group.js";
export * from "./connect-params.js";
export * from "./cluster-session.js";
export * from "./multi-cluster-session.js";
export * from "./switchyard-operator.js";
export { buildCrdManifest, crdName } from "./crd-definition.js";
export type {
  CrdDefinition,
  CrdManifest,
  CustomResource,
  PrinterColumn,
  ResourceOf,
} from "./crd-definition.js";
export { CRD_KINDS, crdDefinitions, crdManifests } from "./manifests.js";
export type { CrdKind } from "./manifests.js";
export { installCrds } from "./crd-installer.js";
export type { InstallCrdsOptions } from "./crd-installer.js";
export {
  CrdInstallError,
  CrdNotEstablishedError,
  CrdSchemaError,
  UnknownCrdKindError,
} from "./crd-errors.js";
export { CustomResourceClient, NamespaceRequiredError } from "./custom-resource-client.js";
export type {
  ClientOf,
  ListOptions,
  MergePatchOptions,
  NewResource,
  ObjectRef,
  ResourceList,
} from "./custom-resource-client.js";
export { parseTarget, formatTarget, InvalidTargetError } from "./target-ref.js";
export type { ParsedTarget } from "./target-ref.js";
export {
  Condition,
  TARGET_KINDS,
  TARGET_PATTERN,
  DNS_LABEL_PATTERN,
  PARENT_NAME_PATTERN,
  TTL_SECONDS_DEFAULT,
  TTL_SECONDS_MIN,
  TTL_SECONDS_MAX,
} from "./schema-primitives.js";
export type { TargetKind } from "./schema-primitives.js";

export type { Static } from "@sinclair/typebox";

/** `metav1.Condition`, as stored in every kind's `status.conditions`. */
export type StatusCondition = NonNullable<SwitchyardOperatorStatus["conditions"]>[number];

export interface ClientOptions {
  /** Field manager recorded on writes (default "switchyard-control-plane"). */
  fieldManager?: string;
}

export function switchyardOperatorClient(kc: KubeConfig, options?: ClientOptions) {
  return new CustomResourceClient<SwitchyardOperatorSpec, SwitchyardOperatorStatus>(
    kc,
    switchyardOperatorCrd,
    options,
  );
}

export function multiClusterSessionClient(kc: KubeConfig, options?: ClientOptions) {
  return new CustomResourceClient<MultiClusterSessionSpec, MultiClusterSessionStatus>(
    kc,
    multiClusterSessionCrd,
    options,
  );
}

export function clusterSessionClient(kc: KubeConfig, options?: ClientOptions) {
  return new CustomResourceClient<ClusterSessionSpec, ClusterSessionStatus>(kc, clusterSessionCrd, options);
}
