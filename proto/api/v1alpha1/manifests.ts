// The CRD manifests of every Switchyard kind, built from their TypeBox definitions.
// The control plane's installCrds applies these objects; the generator renders the same
// objects to YAML.
import { mysqlBranchDatabaseCrd, pgBranchDatabaseCrd } from "./branch-database.js";
import { buildCrdManifest, type CrdDefinition, type CrdManifest } from "./crd-definition.js";
import { clusterSessionCrd } from "./cluster-session.js";
import { multiClusterSessionCrd } from "./multi-cluster-session.js";
import { queueConsumerCrd } from "./queue-consumer.js";
import { switchyardOperatorCrd } from "./switchyard-operator.js";

export const crdDefinitions = {
  SwitchyardOperator: switchyardOperatorCrd,
  MultiClusterSession: multiClusterSessionCrd,
  ClusterSession: clusterSessionCrd,
  PgBranchDatabase: pgBranchDatabaseCrd,
  MysqlBranchDatabase: mysqlBranchDatabaseCrd,
  QueueConsumer: queueConsumerCrd,
} satisfies Record<string, CrdDefinition>;

export type CrdKind = keyof typeof crdDefinitions;
export const CRD_KINDS = Object.keys(crdDefinitions) as CrdKind[];

export const crdManifests: Record<CrdKind, CrdManifest> = Object.fromEntries(
  CRD_KINDS.map((kind) => [kind, buildCrdManifest(crdDefinitions[kind])]),
) as Record<CrdKind, CrdManifest>;
