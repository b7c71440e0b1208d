// Public surface of the Switchyard CRD API (switchyard.dev/v1alpha1): constants, TypeScript
// types, schemas, manifests, the condition setter and thin typed clients. Everything is
// derived from the TypeBox definitions in the kind modules; the YAML under
// charts/switchyard/crds is generated from the same. Everyone imports from here.
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import {
  mysqlBranchDatabaseCrd,
  pgBranchDatabaseCrd,
  type MysqlBranchDatabaseSpec,
  type MysqlBranchDatabaseStatus,
  type PgBranchDatabaseSpec,
  type PgBranchDatabaseStatus,
} from "./branch-database.js";
import { clusterSessionCrd, type ClusterSessionSpec, type ClusterSessionStatus } from "./cluster-session.js";
import { CustomResourceClient } from "./custom-resource-client.js";
import {
  multiClusterSessionCrd,
  type MultiClusterSessionSpec,
  type MultiClusterSessionStatus,
} from "./multi-cluster-session.js";
import { queueConsumerCrd, type QueueConsumerSpec, type QueueConsumerStatus } from "./queue-consumer.js";
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
export * from "./branch-database.js";
export * from "./branch-secret.js";
export * from "./queue-consumer.js";
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
export { CrdSchemaError } from "./crd-errors.js";
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
export { conditionTimestamp, setConditions } from "./conditions.js";
export type { ConditionUpdate, SetConditionsResult, StatusCondition } from "./conditions.js";
export {
  Condition,
  CONDITION_MESSAGE_MAX_LENGTH,
  TARGET_KINDS,
  TARGET_PATTERN,
  ALLOWED_TARGET_PATTERN,
  DNS_LABEL_PATTERN,
  PARENT_NAME_PATTERN,
  TTL_SECONDS_DEFAULT,
  TTL_SECONDS_MIN,
  TTL_SECONDS_MAX,
} from "./schema-primitives.js";
export type { TargetKind } from "./schema-primitives.js";

export type { Static } from "@sinclair/typebox";

export interface ClientOptions {
  /** Field manager recorded on writes (default "switchyard-control-plane"). */
  fieldManager?: string;
  /**
   * Told what each patch made against a read resourceVersion (`MergePatchOptions.resourceVersion`)
   * returned: a controller skips the watch event of its own write (control-plane/src/runtime/own-writes.ts).
   */
  onWrite?: (written: KubernetesObject) => void;
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

export function pgBranchDatabaseClient(kc: KubeConfig, options?: ClientOptions) {
  return new CustomResourceClient<PgBranchDatabaseSpec, PgBranchDatabaseStatus>(
    kc,
    pgBranchDatabaseCrd,
    options,
  );
}

export function mysqlBranchDatabaseClient(kc: KubeConfig, options?: ClientOptions) {
  return new CustomResourceClient<MysqlBranchDatabaseSpec, MysqlBranchDatabaseStatus>(
    kc,
    mysqlBranchDatabaseCrd,
    options,
  );
}

export function queueConsumerClient(kc: KubeConfig, options?: ClientOptions) {
  return new CustomResourceClient<QueueConsumerSpec, QueueConsumerStatus>(kc, queueConsumerCrd, options);
}
